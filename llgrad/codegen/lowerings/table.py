"""The lowering table: one entry per op name, as the op table has one entry per op.

form (how the op becomes code):
  "elementwise"  emit(sg, node, args) -> Scalar: one element of the result from one
                 element of each operand (operands arrive cast to the op's compute dtype;
                 Python-number operands in promoted positions arrive as constants of it,
                 others as the Python value). Fusable: chains of these become one loop.
  "reduce"       a reduction over dims; its operand's elementwise producers are fused in as
                 a prologue. prepare(plan, group) / emit(plan, group, fg).
  "kernel"       any other node that writes its own loops or calls (matmul); its operands
                 are materialised buffers, except those in `prologue`: operand positions
                 whose elementwise producer the kernel computes where it loads them, and
                 its results in `epilogue`: result positions whose elementwise consumers it
                 computes where it stores them (kernel_io.py: its emit reads and writes
                 those through KernelIO). prepare(plan, group) / emit(plan, group, fg).
  "view"         no code: the result aliases its base through its type's strides/offset.
  "constant"     a literal array, placed in the module as a global.

check(node) -> None when the node can be lowered, else a reason (str)."""

LOWERINGS = {}


class Lowering:
    __slots__ = ("op", "form", "emit", "prepare", "check", "prologue", "epilogue")

    def __init__(self, op, form, emit=None, prepare=None, check=None, prologue=(),
                 epilogue=()):
        self.op, self.form, self.emit, self.prepare, self.check = op, form, emit, prepare, check
        self.prologue, self.epilogue = tuple(prologue), tuple(epilogue)

    def __repr__(self):
        return f"<lowering {self.op} ({self.form})>"


def register(op, form, emit=None, prepare=None, check=None, prologue=(), epilogue=()):
    if op in LOWERINGS:
        raise ValueError(f"lowering for {op!r} registered twice")
    LOWERINGS[op] = Lowering(op, form, emit, prepare, check, prologue, epilogue)
    return LOWERINGS[op]


def elementwise(*names, check=None):
    """Decorator: register an elementwise emitter under one or more op names."""
    def deco(fn):
        for n in names:
            register(n, "elementwise", emit=fn, check=check)
        return fn
    return deco


def form_of(node):
    low = LOWERINGS.get(node.op)
    return low.form if low is not None else None
