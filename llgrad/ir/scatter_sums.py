"""A sum of strided_scatters into disjoint places of one buffer, as one scatter of their
stacked operands (or, where those places tile the buffer in order, the stack itself).

Where it comes from: a loop that reads one step of a precomputed tensor each iteration
(`deltaA[:, i]` in a selective scan, `inputs[:, t]` in a hand-written RNN) gets, for that
tensor's gradient, one select VJP per step: strided_scatter of the step's gradient into a
zero buffer of the whole tensor, and the L buffers added up. Each scatter zero-fills the
whole tensor and each add reads two of them: L passes over the whole tensor where one
suffices (Mamba's scan over 32 steps: ~64 MB a chain for a 2 MB tensor).

The rewrite applies to a tree of `add` nodes (alpha 1, each result used once, by the next
add) whose leaves are strided_scatter nodes (each used once) of one span and dtype whose
geometries differ only in their offsets, which step evenly (o0, o0 + s, ...; any order in
the tree; a leaf may be a reshape of the scatter's whole buffer), and whose union,
((L,) + shape, (s,) + strides, o0), provably does not overlap. Then every element of the
sum is one leaf's value or zero, plus at most one other leaf of the tree (kept as it is,
added last): the same numbers but for the sign of a zero (x + 0 is +0 where x is -0).
MIN_TERMS leaves at least."""
from .add_trees import MIXED, chosen_roots, same_key, summaries
from .geometry import contiguous_strides, geometry_overlaps
from .gemm_sums import _emit, _uses
from .graph import Value
from .passes import _rebuild

MIN_TERMS = 2


def _scatter(v, uses):
    """The strided_scatter node v is, or is a reshape of (a view of its whole buffer: the
    select VJP's), used only there; else None."""
    n = v.node
    if n is not None and n.op == "view" and uses.get(v) == 1 and v.type.offset == 0 and \
            v.type.strides == contiguous_strides(v.type.shape):
        v, n = n.inputs[0], n.inputs[0].node
    if n is None or n.op != "strided_scatter" or uses.get(v) != 1 or \
            not isinstance(n.inputs[0], Value):
        return None
    return n


def _joins(n):
    """Whether add node n is a node of a sum's tree (add_trees.py): its operands are tensors
    of its own shape and dtype."""
    t = n.outputs[0].type
    return n.attrs.get("alpha", 1) == 1 and all(
        isinstance(x, Value) and x.type.shape == t.shape and x.type.dtype == t.dtype
        for x in n.inputs)


def _leaf(x, uses):
    """(scatters, other leaves, the scatters' geometry but offset, span and operand type) of
    operand x as a leaf."""
    s = _scatter(x, uses)
    if s is None:
        return 0, 1, None
    shape, strides, _ = s.attrs["geom"]
    t = s.inputs[0].type
    return 1, 0, (tuple(shape), tuple(strides), s.attrs["span"], t.shape, t.dtype)


def _combine(parts):
    return sum(p[0] for p in parts), sum(p[1] for p in parts), same_key([p[2] for p in parts])


def _takes(summary):
    """Whether a subtree is a sum of MIN_TERMS or more scatters of one geometry but their
    offsets, and at most one other term."""
    n, others, key = summary
    return others <= 1 and n >= MIN_TERMS and key is not MIXED


def _leaves(root, uses):
    """(scatter nodes, other leaf Values) of the add tree under root, left to right."""
    scatters, others, stack = [], [], [root]
    while stack:
        v = stack.pop()
        n = v.node
        if n is not None and n.op == "add" and n.attrs.get("alpha", 1) == 1 and \
                (v is root or uses.get(v) == 1) and all(isinstance(x, Value) for x in n.inputs) \
                and all(x.type.shape == root.type.shape and x.type.dtype == root.type.dtype
                        for x in n.inputs):
            stack.extend(reversed(n.inputs))
            continue
        s = _scatter(v, uses)
        if s is None:
            others.append(v)
        else:
            scatters.append(s)
    return scatters, others


def _union(scatters, root):
    """(the leaves in offset order, the union's geometry) or None."""
    n0 = scatters[0]
    shape, strides, _ = n0.attrs["geom"]
    shape, strides = tuple(shape), tuple(strides)
    span, x0 = n0.attrs["span"], n0.inputs[0].type
    for n in scatters:
        sh, st, _ = n.attrs["geom"]
        x = n.inputs[0].type
        if (tuple(sh), tuple(st)) != (shape, strides) or n.attrs["span"] != span or \
                x.shape != x0.shape or x.dtype != root.type.dtype or \
                n.outputs[0].type.dtype != root.type.dtype or _numel(root.type.shape) != span:
            return None
    order = sorted(scatters, key=lambda n: n.attrs["geom"][2])
    offsets = [n.attrs["geom"][2] for n in order]
    step = offsets[1] - offsets[0]
    if step <= 0 or any(b - a != step for a, b in zip(offsets, offsets[1:])):
        return None
    geom = ((len(order),) + shape, (step,) + strides, offsets[0])
    if geometry_overlaps(*geom[:2]) or geometry_overlaps(shape, strides):
        return None
    return order, geom


def _stack_dim(geom, span):
    """The dim of a stack whose contiguous result is the scattered buffer itself, or None."""
    shape, strides, offset = geom
    if offset != 0 or span != _numel(shape):
        return None
    for d in range(len(shape)):     # (the stacked dim moved to position d)
        sh = shape[1:d + 1] + shape[:1] + shape[d + 1:]
        st = strides[1:d + 1] + strides[:1] + strides[d + 1:]
        if all(n == 1 or s == c for n, s, c in zip(sh, st, contiguous_strides(sh))):
            return d
    return None


def _numel(shape):
    out = 1
    for n in shape:
        out *= n
    return out


def merge_scatter_sums(graph):
    """graph with each qualifying sum of strided_scatters as one (a new Graph; graph itself
    when there is none)."""
    uses = _uses(graph)
    summary, parent = summaries(graph, uses, _joins, lambda x: _leaf(x, uses), _combine)
    plans, budget = {}, [4 * len(graph.nodes)]

    def take(n):
        # (a subtree whose offsets do not step evenly is searched below, as long as the
        # leaves walked so far stay within a few times the graph: linear in a long chain)
        if not _takes(summary[n]) or budget[0] <= 0:
            return False
        root = n.outputs[0]
        scatters, others = _leaves(root, uses)
        budget[0] -= len(scatters) + len(others)
        union = _union(scatters, root)
        if union is not None:
            plans[n] = union + (others,)
        return union is not None

    chosen_roots(graph, summary, parent, take, lambda s: s[0] >= MIN_TERMS)
    if not plans:
        return graph
    nodes, subst = [], {}
    for n in graph.nodes:
        plan = plans.get(n)
        if plan is None:
            nodes.append(n)
            continue
        order, geom, others = plan
        span = order[0].attrs["span"]
        xs = [s.inputs[0] for s in order]
        dim = _stack_dim(geom, span)
        shape = tuple(n.outputs[0].type.shape)
        if dim is not None:
            total = _emit(nodes, "stack", xs, n.loc, dim=dim)
        else:
            stacked = _emit(nodes, "stack", xs, n.loc, dim=0)
            total = _emit(nodes, "strided_scatter", [stacked], n.loc, geom=geom, span=span)
        if tuple(total.type.shape) != shape:
            total = _emit(nodes, "view", [total], n.loc, shape=shape)
        for o in others:
            total = _emit(nodes, "add", [o, total], n.loc, alpha=1)
        subst[n.outputs[0]] = total
    return _rebuild(graph, nodes, subst)
