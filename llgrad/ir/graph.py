"""IR data: tensor types, values, nodes and graphs (plain data, SSA), and a builder.

A TensorType carries dtype, shape, strides and offset (in elements), so a view's type says
exactly which elements of its base it reads. A node's operands are Values or Python
constants (numbers, None, bools); its attributes are plain literals, except that control-flow
nodes (ops_control.py) hold their regions as attributes: closed sub-Graphs whose inputs are
the node's operands (no region reads an outer value except through an operand)."""
from dataclasses import dataclass, field

from .optable import contiguous_strides as contiguous

DTYPE_SHORT = {"float32": "f32", "float64": "f64", "float16": "f16", "int64": "i64",
               "int32": "i32", "int16": "i16", "int8": "i8", "uint8": "u8", "bool": "b8"}
SHORT_DTYPE = {v: k for k, v in DTYPE_SHORT.items()}


@dataclass(frozen=True)
class TensorType:
    dtype: str                 # "float32", "int64", "bool", ...
    shape: tuple
    strides: tuple = None
    offset: int = 0

    def __post_init__(self):
        if self.strides is None:
            object.__setattr__(self, "strides", contiguous(self.shape))

    @property
    def numel(self):
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def itemsize(self):
        return {"float64": 8, "int64": 8, "float32": 4, "int32": 4, "float16": 2, "int16": 2,
                "int8": 1, "uint8": 1, "bool": 1}[self.dtype]

    @property
    def nbytes(self):
        return self.numel * self.itemsize

    def __str__(self):
        s = f"{DTYPE_SHORT[self.dtype]}[{','.join(map(str, self.shape))}]" \
            f"{{{','.join(map(str, self.strides))}}}"
        return s + (f"+{self.offset}" if self.offset else "")


@dataclass(frozen=True)
class StackType:
    """The values one carried variable of a `while_loop` took, one per iteration: what the
    loop's backward reads in reverse. Its length is the trip count, known only when the loop
    runs, so it is a type of its own rather than a TensorType with an unknown dimension
    (shape, strides and numel stay exact integers everywhere else). At run time a stack is
    an array of shape (trip count, *elem.shape). `nbytes` is the size of one iteration's
    entry: the cost estimate the forward/backward partition weighs."""
    elem: TensorType

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


@dataclass(eq=False)
class Node:
    op: str
    inputs: list                       # Values or Python constants
    attrs: dict
    outputs: list = field(default_factory=list)
    loc: str = ""                      # the user's file:line
    view_of: "Value" = None            # the value this view aliases (views only)

    @property
    def output(self):
        return self.outputs[0]


@dataclass(eq=False)
class Graph:
    name: str
    inputs: list
    nodes: list
    outputs: list
    mutated: dict = field(default_factory=dict)   # input index -> Value of its final content
    guards: list = field(default_factory=list)    # Guard: a traced value's outcome to re-check

    def values(self):
        yield from self.inputs
        for n in self.nodes:
            yield from n.outputs

    def __str__(self):
        from .printer import print_graph
        return print_graph(self)


@dataclass(frozen=True)
class Guard:
    """Tracing took a Python decision on a tensor's value (bool(t), t.item()): the graph is
    valid only while `value` still equals `expected`."""
    value: Value
    expected: object
    loc: str = ""


class Builder:
    """Appends nodes to a graph under construction, typing results with the op table's
    shape rules (or a type the caller already knows)."""

    def __init__(self, name="f"):
        self.graph = Graph(name, [], [], [])

    def input(self, type, name=None):
        v = Value(type, None, len(self.graph.inputs), name or f"arg{len(self.graph.inputs)}")
        self.graph.inputs.append(v)
        return v

    def add(self, op, inputs, attrs=None, types=None, loc="", view_of=None):
        from .shape_rules import infer_types
        attrs = dict(attrs or {})
        if types is None:
            types = infer_types(op, [x.type if isinstance(x, Value) else x for x in inputs],
                                attrs)
        node = Node(op, list(inputs), attrs, [], loc, view_of)
        node.outputs = [Value(t, node, i) for i, t in enumerate(types)]
        self.graph.nodes.append(node)
        return node.outputs[0] if len(node.outputs) == 1 else tuple(node.outputs)

    def ret(self, *values):
        self.graph.outputs = list(values)
        return self.graph
