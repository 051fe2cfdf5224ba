"""Graph -> Graph passes: dead-code elimination and common-subexpression elimination. Each
returns a new Graph, or its input where it changes nothing, and leaves its input unchanged
(sink_free_nodes' graph holds its input's nodes in another order).
Control-flow nodes are kept whole: their regions are closed graphs, shared by the copy,
and a pass treats the node as one opaque pure op (never merged with another)."""
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
    if len(keep) == len(graph.nodes):
        return graph            # (nothing dead: the input itself, already verified)
    keep.reverse()
    return _rebuild(graph, keep)


def _key(n, subst):
    ins = tuple([("v", id(subst.get(x, x))) if isinstance(x, Value) else ("c", literal(x))
                 for x in n.inputs])
    # (most nodes have no attributes: their literal is skipped, a tenth of cse's time)
    return (n.op, ins, literal(tuple(sorted(n.attrs.items()))) if n.attrs else "")


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
    if not subst:
        return graph            # (no duplicate: the input itself, already verified)
    return _rebuild(graph, keep, subst)


FLOATING_KINDS = frozenset(("elementwise", "view", "reduce"))


def sink_free_nodes(graph):
    """Move each node that reads only graph inputs and constants (or other such nodes) to
    where it is first needed. A backward recomputes cheap forward values from saved ones
    (q * scale, a transposed weight) at its start, where nothing orders them: left there,
    a deep model's recomputations, one per layer, fuse into one loop at the top, with
    their buffers live for the whole backward and each layer's groups no longer the same
    as its neighbours' (kernel dedupe misses). Only pure ops move (elementwise, views,
    reductions: no random state, no error flags). Every other node keeps its order; before
    each, the free nodes it reads that are not yet placed are, operands first (earliest
    first), then those the outputs read, then any left."""
    free = set()
    for n in graph.nodes:
        if n.op in OPS and OPS[n.op].kind in FLOATING_KINDS and all(
                x.node is None or x.node in free for x in _reads(n)):
            free.add(n)
    if not free:
        return graph
    position = {n: i for i, n in enumerate(graph.nodes)}
    order, placed = [], set()

    def place_needed(values):
        """Place the unplaced free nodes `values` depend on, in post-order (no recursion:
        a stack of (node, whether its operands are placed))."""
        stack = [(v.node, False) for v in sorted(
            (v for v in values if v.node in free), key=lambda v: -position[v.node])]
        while stack:
            n, ready = stack.pop()
            if n in placed:
                continue
            if ready:
                placed.add(n)
                order.append(n)
                continue
            stack.append((n, True))
            for x in sorted((x for x in _reads(n) if x.node in free and x.node not in placed),
                            key=lambda x: -position[x.node]):
                stack.append((x.node, False))

    for n in graph.nodes:
        if n not in free:
            place_needed(_reads(n))
            order.append(n)
    place_needed([v for v in list(graph.outputs) + list(graph.mutated.values())
                  + [g.value for g in graph.guards] if isinstance(v, Value)])
    order.extend(n for n in graph.nodes if n in free and n not in placed)
    if order == graph.nodes:
        return graph
    # (the same nodes in another order: no copies, a node is never changed in place)
    return Graph(graph.name, list(graph.inputs), order, list(graph.outputs),
                 dict(graph.mutated), list(graph.guards))


def _reads(n):
    """The Values node n reads: its operands and the base it views."""
    vals = [x for x in n.inputs if isinstance(x, Value)]
    return vals + [n.view_of] if n.view_of is not None else vals
