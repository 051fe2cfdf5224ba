"""Composite ops written as the primitive ops their VJP rules are written with, before
native code is made: each op that declares `decompose` in the op table (layer_norm, gelu,
addmm, the fused LSTM and GRU cells) is replaced by what its rule emits: a Value, or one per
result for an op of several (fused_lstm_cell's (hy, cy)).

Why: a compiled training step holds `layer_norm` in its forward and, in its backward, the
rule's own recomputation of the mean and the reciprocal standard deviation
(`_norm_vjp` in ops_nn.py). As one opaque node the forward cannot share anything with that
recomputation. Written as the same primitive ops, with the same operands and attributes,
common-subexpression elimination (passes.cse) merges the two, and the native scheduler can
fuse the row statistics of forward and backward into one walk over each row
(codegen/schedule/rows.py). addmm becomes mm and add, so the bias joins the elementwise group
after the product; an op of the user's own with a decomposition needs no lowering at all.

The rewrite keeps the graph's inputs, outputs (by position), mutated inputs and guards.
`expand_composites` runs before lowering to LLVM; the reference interpreter keeps running
the graph as traced (the ops' NumPy implementations), so the two stay independent checks of
each other."""
from .geometry import contiguous_strides
from .graph import Node, Value
from .optable import CONTROL, OPS
from .passes import _rebuild
from .shape_rules import infer_types

FLOATS = ("float32", "float64")


class _Emitter:
    """Appends typed primitive nodes (at the composite node's source line)."""

    def __init__(self, nodes, loc):
        self.nodes, self.loc = nodes, loc

    def __call__(self, op, inputs, **attrs):
        types = infer_types(op, [x.type if isinstance(x, Value) else x for x in inputs], attrs)
        view_of = inputs[0] if op in OPS and OPS[op].kind == "view" else None
        node = Node(op, list(inputs), attrs, [], self.loc, view_of)
        node.outputs = [Value(t, node, i) for i, t in enumerate(types)]
        self.nodes.append(node)
        return node.outputs[0]


def _applies(node):
    """A composite at one of its decompose_dtypes with non-empty results, its tensor
    operands of its dtype."""
    op = OPS.get(node.op)
    x = node.inputs[0] if node.inputs else None
    out = node.outputs[0] if node.outputs else None
    if op is None or op.decompose is None or not isinstance(x, Value) \
            or x.type.dtype not in op.decompose_dtypes or out.type.dtype != x.type.dtype \
            or any(isinstance(v, Value) and v.type.dtype != x.type.dtype
                   for v in node.inputs[1:]):
        return False
    # (a broadcasting composite, addmm's self, is planned from its result's shape)
    return op.kind != "elementwise" or out.type.shape == x.type.shape


def expand_composites(graph, only=None):
    """graph with each composite (each of `only`, when given) written as primitive ops (a new
    Graph; the input graph is unchanged). Returns graph itself when there is nothing to
    expand."""
    if not any(_applies(n) and (only is None or n in only) for n in graph.nodes):
        return graph
    nodes, subst, skip = [], {}, set()
    uses, kept = _uses(graph), _kept(graph)
    for n in graph.nodes:
        if n in skip:
            continue
        if not _applies(n) or only is not None and n not in only:
            nodes.append(n)
            continue
        views = _reshaped_addmm(n, uses, kept)
        if views:
            y = _addmm_through_view(n, views[0].outputs[0].type.shape, _Emitter(nodes, n.loc))
            skip.update(views)
            for v in views:
                subst[v.outputs[0]] = y
            continue
        ys = OPS[n.op].decompose(n, _Emitter(nodes, n.loc))
        for out, y in zip(n.outputs, ys if isinstance(ys, (tuple, list)) else (ys,)):
            if y.type.strides != out.type.strides:
                y = _Emitter(nodes, n.loc)("clone", [y], memory_format="contiguous")
            subst[out] = y
    return _rebuild(graph, nodes, subst)


def expand_composites_in_regions(graph):
    """expand_composites over graph and, at every depth, over the regions of its control
    nodes (cond, while_loop), which native code plans as graphs of their own: a region
    keeps its inputs and outputs by position, so its control node takes the expansion as
    it is. (New graphs and node copies: the traced graph and its regions are unchanged.)
    Regions are expanded before the graphs that hold them (a stack, not recursion)."""
    done, stack = {}, [(graph, False)]     # id(graph) -> its expansion (graphs kept alive)
    while stack:
        g, regions_done = stack.pop()
        if regions_done:
            done[id(g)] = (g, _expand_with_regions(g, done))
            continue
        stack.append((g, True))
        stack.extend((region, False) for region in _regions(g) if id(region) not in done)
    return done[id(graph)][1]


def _regions(graph):
    for n in graph.nodes:
        op = CONTROL.get(n.op)
        for key in (op.regions if op is not None else ()):
            yield n.attrs[key]


def _expand_with_regions(graph, done):
    """expand_composites(graph) with its control nodes' regions swapped for their
    expansions in `done`."""
    out = expand_composites(graph)
    new_regions = {}
    for i, n in enumerate(out.nodes):
        op = CONTROL.get(n.op)
        for key in (op.regions if op is not None else ()):
            region = done[id(n.attrs[key])][1]
            if region is not n.attrs[key]:
                new_regions[i, key] = region
    if not new_regions:
        return out
    if out is graph:
        out = _rebuild(graph, graph.nodes)      # (copies, one per node, in order)
    for (i, key), region in new_regions.items():
        out.nodes[i].attrs[key] = region
    return out


# ---- addmm read through a reshape ---------------------------------------------------------------
# F.linear on a stack of rows is view -> addmm -> view: the bias added to the 2-D product
# would be a group of that shape, which no elementwise group of the readers' shape joins
# (codegen/schedule/cluster.py: a cluster is one iteration shape, its members read its
# values directly), so a transformer's fc1 stored the biased product in a pass of its own
# before GELU read it back. When every use of the addmm's result is a view to one shape,
# the product is viewed first and the bias added in the readers' shape (the same sums).
_VIEWS = ("view", "_unsafe_view")


def _uses(graph):
    uses = {}
    for n in graph.nodes:
        for x in n.inputs:
            if isinstance(x, Value):
                uses.setdefault(x, []).append(n)
    return uses


def _kept(graph):
    return set(graph.outputs) | set(graph.mutated.values()) | {g.value for g in graph.guards}


def _reshaped_addmm(n, uses, kept):
    """The view nodes of an addmm (beta 1) all of whose uses are views to one contiguous
    shape with the product's last dim, its bias a row or less; else None."""
    if n.op != "addmm" or n.attrs.get("beta", 1) != 1 or n.outputs[0] in kept:
        return None
    out, bias = n.outputs[0], n.inputs[0]
    views = uses.get(out, [])
    if not views or any(v.op not in _VIEWS or v.inputs[0] is not out or
                        any(x is out for x in v.inputs[1:]) for v in views):
        return None
    types = [v.outputs[0].type for v in views]
    shape = tuple(types[0].shape)
    if any(tuple(t.shape) != shape or t.strides != types[0].strides for t in types) or \
            tuple(types[0].strides) != tuple(contiguous_strides(shape)) or not shape or \
            shape[-1] != out.type.shape[-1] or shape == tuple(out.type.shape) or \
            any(d != 1 for d in bias.type.shape[:-1]):
        return None
    return views


def _addmm_through_view(n, shape, emit):
    bias, a, b = n.inputs[:3]
    alpha = n.attrs.get("alpha", 1)
    y = emit("mm", [a, b])
    if alpha != 1:
        y = emit("mul", [y, alpha])
    return emit("add", [emit("view", [y], shape=shape), bias], alpha=1)
