"""IR data: tensor types, values, nodes and graphs (plain data, SSA), and a builder.

A TensorType carries dtype, shape, strides and offset (in elements), so a view's type says
exactly which elements of its base it reads. A node's operands are Values or Python
constants (numbers, None, bools); its attributes are plain literals, except that control-flow
nodes (ops_control.py) hold their regions as attributes: closed sub-Graphs whose inputs are
the node's operands (no region reads an outer value except through an operand)."""
from .geometry import contiguous_strides as contiguous

DTYPE_SHORT = {"float32": "f32", "float64": "f64", "float16": "f16", "int64": "i64",
               "int32": "i32", "int16": "i16", "int8": "i8", "uint8": "u8", "bool": "b8",
               "complex64": "c64", "complex128": "c128"}
SHORT_DTYPE = {v: k for k, v in DTYPE_SHORT.items()}


class _Frozen:
    """Immutable plain data compared by its fields (what dataclass(frozen=True) gives, for
    a fraction of its import cost: generating dataclasses took ~4 ms of `import llgrad`)."""
    __slots__ = ()
    _fields = ()

    def _key(self):
        return tuple(getattr(self, f) for f in self._fields)

    def __setattr__(self, name, value):
        raise AttributeError(f"cannot assign to field {name!r} of {type(self).__name__}")

    def __delattr__(self, name):
        raise AttributeError(f"cannot delete field {name!r} of {type(self).__name__}")

    def __eq__(self, other):
        return type(other) is type(self) and self._key() == other._key()

    def __hash__(self):
        return hash(self._key())

    def __repr__(self):
        return f"{type(self).__name__}(" + ", ".join(
            f"{f}={getattr(self, f)!r}" for f in self._fields) + ")"

    def __reduce__(self):
        return type(self), self._key()


class TensorType(_Frozen):
    """A value's type: dtype name, shape, strides (in elements) and storage offset; prints
    as f32[4,3]{3,1}+offset."""
    _fields = ("dtype", "shape", "strides", "offset")
    __slots__ = _fields + ("_hash",)

    def __init__(self, dtype, shape, strides=None, offset=0):
        init = object.__setattr__
        init(self, "dtype", dtype)          # "float32", "int64", "bool", ...
        init(self, "shape", shape)
        init(self, "strides", contiguous(shape) if strides is None else strides)
        init(self, "offset", offset)

    def _key(self):             # (types are compared and hashed often: no generator)
        return self.dtype, self.shape, self.strides, self.offset

    def __hash__(self):         # (immutable: hashed once; dict keys of every pass and plan)
        try:
            return self._hash
        except AttributeError:
            h = hash((self.dtype, self.shape, self.strides, self.offset))
            object.__setattr__(self, "_hash", h)
            return h

    @property
    def numel(self):
        """The number of elements."""
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def itemsize(self):
        """Bytes per element."""
        return {"float64": 8, "int64": 8, "float32": 4, "int32": 4, "float16": 2, "int16": 2,
                "int8": 1, "uint8": 1, "bool": 1, "complex64": 8,
                "complex128": 16}[self.dtype]

    @property
    def nbytes(self):
        """Bytes of the elements (numel * itemsize)."""
        return self.numel * self.itemsize

    def __str__(self):
        s = f"{DTYPE_SHORT[self.dtype]}[{','.join(map(str, self.shape))}]" \
            f"{{{','.join(map(str, self.strides))}}}"
        return s + (f"+{self.offset}" if self.offset else "")


class StackType(_Frozen):
    """The values one carried variable of a `while_loop` took, one per iteration: what the
    loop's backward reads in reverse. Its length is the trip count, known only when the loop
    runs, so it is a type of its own rather than a TensorType with an unknown dimension
    (shape, strides and numel stay exact integers everywhere else). At run time a stack is
    an array of shape (trip count, *elem.shape). `nbytes` is the size of one iteration's
    entry: the cost estimate the forward/backward partition weighs."""
    __slots__ = _fields = ("elem",)

    def __init__(self, elem):
        object.__setattr__(self, "elem", elem)

    @property
    def dtype(self):
        return self.elem.dtype

    @property
    def nbytes(self):
        return self.elem.nbytes

    def __str__(self):
        return f"stack({self.elem})"


class Value:
    """An SSA value: a graph input or one output of a node."""
    __slots__ = ("type", "node", "index", "name")

    def __init__(self, type, node=None, index=0, name=None):
        self.type = type
        self.node = node          # producing Node, or None for a graph input
        self.index = index        # which output of node
        self.name = name          # printed name (inputs keep the user's names)

    def __repr__(self):
        return f"%{self.name}: {self.type}"


class Node:
    """One operation: compared by identity (it is a place in a graph)."""

    def __init__(self, op, inputs, attrs, outputs=None, loc="", view_of=None):
        self.op = op
        self.inputs = inputs                # Values or Python constants
        self.attrs = attrs
        self.outputs = [] if outputs is None else outputs
        self.loc = loc                      # the user's file:line
        self.view_of = view_of              # the value this view aliases (views only)

    def __repr__(self):
        return (f"Node(op={self.op!r}, inputs={self.inputs!r}, attrs={self.attrs!r}, "
                f"outputs={self.outputs!r}, loc={self.loc!r}, view_of={self.view_of!r})")

    @property
    def output(self):
        """The node's first (usually only) output Value."""
        return self.outputs[0]


class Graph:
    """Compared by identity; str() is its one text form (printer.py gives it)."""

    def __init__(self, name, inputs, nodes, outputs, mutated=None, guards=None):
        self.name = name
        self.inputs = inputs
        self.nodes = nodes
        self.outputs = outputs
        self.mutated = {} if mutated is None else mutated   # input index -> its final Value
        self.guards = [] if guards is None else guards      # Guard: an outcome to re-check

    def __repr__(self):
        return f"<Graph {self.name}: {len(self.inputs)} inputs, {len(self.nodes)} nodes>"

    def __getstate__(self):
        """Without the interpreter's per-graph cache (interpret.py's _plan: closures that do
        not pickle): a control node's region the interpreter ran kept its graph's prepared
        plan out of the disk cache (codegen/prepared.py)."""
        state = dict(self.__dict__)
        state.pop("_interpret_plan", None)
        return state

    def values(self):
        """Every Value: the inputs, then each node's outputs in order."""
        yield from self.inputs
        for n in self.nodes:
            yield from n.outputs



class Guard(_Frozen):
    """Tracing took a Python decision on a tensor's value (bool(t), t.item()): the graph is
    valid only while `value` still equals `expected`."""
    __slots__ = _fields = ("value", "expected", "loc")

    def __init__(self, value, expected, loc=""):
        init = object.__setattr__
        init(self, "value", value)
        init(self, "expected", expected)
        init(self, "loc", loc)
