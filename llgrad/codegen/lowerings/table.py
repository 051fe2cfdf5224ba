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

check(node) -> None when the node can be lowered, else a reason (str).

Lowerings of rarer ops (convolutions, pooling, linear algebra, sorting, ...) are registered
by modules imported on the first lookup of an op the table lacks (`defer`): compiling their
source is ~0.1 s of a cold process's first build, which a graph of matmuls, norms and
elementwise ops never needs. Every lookup (`get`, `in`, `[]`) and every walk over the whole
table sees them."""
import threading


class _Table(dict):
    """The op -> Lowering dict, completed by the deferred loaders before it answers "no"."""
    __slots__ = ()

    def complete(self):
        """Run the deferred loaders (once; later calls return at once)."""
        if _deferred:
            with _defer_lock:
                while _deferred:
                    loader = _deferred.pop(0)
                    try:
                        loader()
                    except BaseException:
                        _deferred.insert(0, loader)     # (tried again at the next miss)
                        raise

    def registered(self, op):
        """Whether op is in the table now (no deferred loading: for registering)."""
        return dict.__contains__(self, op)

    def get(self, op, default=None):
        if not dict.__contains__(self, op):
            self.complete()
        return dict.get(self, op, default)

    def __contains__(self, op):
        if not dict.__contains__(self, op):
            self.complete()
        return dict.__contains__(self, op)

    def __missing__(self, op):
        self.complete()
        if dict.__contains__(self, op):
            return dict.__getitem__(self, op)
        raise KeyError(op)

    def __iter__(self):
        self.complete()
        return dict.__iter__(self)

    def __len__(self):
        self.complete()
        return dict.__len__(self)

    def keys(self):
        self.complete()
        return dict.keys(self)

    def values(self):
        self.complete()
        return dict.values(self)

    def items(self):
        self.complete()
        return dict.items(self)


LOWERINGS = _Table()
_deferred = []          # loaders (no arguments) that register more lowerings, run on a miss
# (re-entrant: a loader's imports may look an op up; a build on another thread waits for
# the loaders rather than seeing a half-filled table)
_defer_lock = threading.RLock()


def defer(loader):
    """Run loader() (which registers lowerings) on the first lookup the table cannot
    answer, instead of now."""
    _deferred.append(loader)


class Lowering:
    __slots__ = ("op", "form", "emit", "prepare", "check", "prologue", "epilogue")

    def __init__(self, op, form, emit=None, prepare=None, check=None, prologue=(),
                 epilogue=()):
        self.op, self.form, self.emit, self.prepare, self.check = op, form, emit, prepare, check
        self.prologue, self.epilogue = tuple(prologue), tuple(epilogue)

    def __repr__(self):
        return f"<lowering {self.op} ({self.form})>"


def register(op, form, emit=None, prepare=None, check=None, prologue=(), epilogue=()):
    if LOWERINGS.registered(op):
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
