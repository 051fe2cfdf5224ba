"""The lowering table: one entry per op name, as the op table has one entry per op.

kind:
  "elementwise"  emit(sg, node, args) -> Scalar: one element of the result from one
                 element of each operand (operands arrive cast to the op's compute dtype;
                 Python-number operands in promoted positions arrive as constants of it,
                 others as the Python value). Fusable: chains of these become one loop.
  "reduce"       a reduction over dims; its operand's elementwise producers are fused in as
                 a prologue. prepare(plan, group) / emit(plan, group, fg).
  "kernel"       any other node that writes its own loops or calls (matmul); its operands
                 are materialised buffers. prepare(plan, group) / emit(plan, group, fg).
  "view"         no code: the result aliases its base through its type's strides/offset.
  "constant"     a literal array, placed in the module as a global.

check(node) -> None when the node can be lowered, else a reason (str)."""

LOWERINGS = {}


class Lowering:
    __slots__ = ("op", "kind", "emit", "prepare", "check")

    def __init__(self, op, kind, emit=None, prepare=None, check=None):
        self.op, self.kind, self.emit, self.prepare, self.check = op, kind, emit, prepare, check

    def __repr__(self):
        return f"<lowering {self.op} ({self.kind})>"


def register(op, kind, emit=None, prepare=None, check=None):
    if op in LOWERINGS:
        raise ValueError(f"lowering for {op!r} registered twice")
    LOWERINGS[op] = Lowering(op, kind, emit, prepare, check)
    return LOWERINGS[op]


def elementwise(*names, check=None):
    """Decorator: register an elementwise emitter under one or more op names."""
    def deco(fn):
        for n in names:
            register(n, "elementwise", emit=fn, check=check)
        return fn
    return deco


def kind_of(node):
    low = LOWERINGS.get(node.op)
    return low.kind if low is not None else None
