"""Graph -> Graph passes: dead-code elimination and common-subexpression elimination. Each
returns a new Graph and leaves its input unchanged. Control-flow nodes are kept whole:
their regions are closed graphs, shared by the copy, and a pass treats the node as one
opaque pure op (never merged with another)."""
from .graph import Graph, Guard, Node, Value
from .optable import CONTROL, OPS
from .printer import literal

RANDOM_OPS = frozenset(n for n, op in OPS.items() if op.kind == "random")


def _rebuild(graph, nodes, subst=None):
    """A new graph of copies of `nodes` with fresh result Values (the input graph's Values
    keep pointing at its own nodes), uses renamed through subst (old Value -> Value)."""
    subst = dict(subst or {})

    def fix(x):
        if not isinstance(x, Value):
            return x
        while x in subst:             # cse maps a duplicate to an earlier old Value
            x = subst[x]
        return x

    new_nodes = []
    for n in nodes:
        m = Node(n.op, [fix(x) for x in n.inputs], dict(n.attrs), [], n.loc,
                 fix(n.view_of) if n.view_of is not None else None)
        m.outputs = [Value(o.type, m, o.index, o.name) for o in n.outputs]
        subst.update(zip(n.outputs, m.outputs))
        new_nodes.append(m)
    return Graph(graph.name, list(graph.inputs), new_nodes, [fix(v) for v in graph.outputs],
                 {i: fix(v) for i, v in graph.mutated.items()},
                 [Guard(fix(g.value), g.expected, g.loc) for g in graph.guards])


def dce(graph):
    """Drop nodes none of whose results is used (iteratively, back to front)."""
    live = set(graph.outputs) | set(graph.mutated.values()) | {g.value for g in graph.guards}
    keep = []
    for n in reversed(graph.nodes):
        if any(o in live for o in n.outputs):
            keep.append(n)
            live.update(x for x in n.inputs if isinstance(x, Value))
            if n.view_of is not None:
                live.add(n.view_of)
    keep.reverse()
    return _rebuild(graph, keep)


def _key(n, subst):
    ins = tuple(("v", id(subst.get(x, x))) if isinstance(x, Value) else ("c", literal(x))
                for x in n.inputs)
    return (n.op, ins, literal(tuple(sorted(n.attrs.items()))))


def cse(graph):
    """Replace a node by an earlier identical one (same op, operands and attributes)."""
    seen, subst, keep = {}, {}, []
    for n in graph.nodes:
        if n.op in RANDOM_OPS or n.op in CONTROL:     # regions are not compared
            keep.append(n)
            continue
        k = _key(n, subst)
        prev = seen.get(k)
        if prev is not None:
            for a, b in zip(n.outputs, prev.outputs):
                subst[a] = b
            continue
        seen[k] = n
        keep.append(n)
    return _rebuild(graph, keep, subst)
