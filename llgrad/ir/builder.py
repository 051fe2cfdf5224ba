"""Building a graph node by node, each result typed by the op table's shape rules."""
from .graph import Graph, Node, Value
from .shape_rules import infer_types


class Builder:
    """Appends nodes to a graph under construction, typing results with the op table's
    shape rules (or a type the caller already knows)."""

    def __init__(self, name="f"):
        self.graph = Graph(name, [], [], [])

    def input(self, type, name=None):
        """Add a graph input of this TensorType; its Value."""
        v = Value(type, None, len(self.graph.inputs), name or f"arg{len(self.graph.inputs)}")
        self.graph.inputs.append(v)
        return v

    def add(self, op, inputs, attrs=None, types=None, loc="", view_of=None):
        """Append a node of op on inputs (Values or literals), its output types inferred
        unless given; its Value (a tuple for several outputs)."""
        attrs = dict(attrs or {})
        if types is None:
            types = infer_types(op, [x.type if isinstance(x, Value) else x for x in inputs],
                                attrs)
        node = Node(op, list(inputs), attrs, [], loc, view_of)
        node.outputs = [Value(t, node, i) for i, t in enumerate(types)]
        self.graph.nodes.append(node)
        return node.outputs[0] if len(node.outputs) == 1 else tuple(node.outputs)

    def ret(self, *values):
        """Set the graph's outputs; the Graph."""
        self.graph.outputs = list(values)
        return self.graph
