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


def expand_composites(graph):
    """graph with each composite written as primitive ops (a new Graph; the input graph is
    unchanged). Returns graph itself when there is nothing to expand."""
    if not any(_applies(n) for n in graph.nodes):
        return graph
    nodes, subst = [], {}
    for n in graph.nodes:
        if not _applies(n):
            nodes.append(n)
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
