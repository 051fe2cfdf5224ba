"""Decomposition of composite ops (layer_norm, gelu, addmm) into the primitive ops their VJP rules are written with.

Why: a compiled training step holds `layer_norm` in its forward and, in its backward, the
rule's own recomputation of the mean and the reciprocal standard deviation
(`_norm_vjp` in ops_nn.py). As one opaque node the forward cannot share anything with that
recomputation. Written as the same primitive ops, with the same operands and attributes,
common-subexpression elimination (passes.cse) merges the two, and the native scheduler can
fuse the row statistics of forward and backward into one walk over each row
(codegen/schedule/rows.py).

addmm (F.linear with a bias, named as PyTorch names it) becomes mm and add, so that the
scheduler fuses the bias into the elementwise group that follows (tanh(x @ W.T + b) is one
pass over the product, not two).

The rewrite keeps the graph's inputs, outputs (by position), mutated inputs and guards.
`decompose_norms` runs before lowering to LLVM; the reference interpreter keeps running the
graph as traced, so the two stay independent checks of each other."""
from .graph import Node, Value
from .ops_elementwise import _SQRT2, _SQRT_2_OVER_PI
from .passes import _rebuild
from .shape_rules import infer_types

FLOATS = ("float32", "float64")


class _Emitter:
    """Appends typed primitive nodes (at the composite node's source line)."""

    def __init__(self, nodes, loc):
        self.nodes, self.loc = nodes, loc

    def __call__(self, op, inputs, **attrs):
        types = infer_types(op, [x.type if isinstance(x, Value) else x for x in inputs], attrs)
        node = Node(op, list(inputs), attrs, [], self.loc)
        node.outputs = [Value(t, node, i) for i, t in enumerate(types)]
        self.nodes.append(node)
        return node.outputs[0]


def _layer_norm(node, emit):
    """The primitives of ops_nn._norm_vjp's recomputation, in its order and with its
    attributes, then the affine part as the forward impl applies it."""
    x, w, b = (list(node.inputs) + [None, None])[:3]
    dims = tuple(range(len(x.type.shape) - node.attrs["normalized_ndim"], len(x.type.shape)))
    mu = emit("mean", [x], dim=dims, keepdim=True)
    xc = emit("sub", [x, mu], alpha=1)
    var = emit("mean", [emit("mul", [xc, xc])], dim=dims, keepdim=True)
    rstd = emit("rsqrt", [emit("add", [var, node.attrs["eps"]], alpha=1)])
    y = emit("mul", [xc, rstd])
    if isinstance(w, Value):
        y = emit("mul", [y, w])
    if isinstance(b, Value):
        y = emit("add", [y, b], alpha=1)
    return y


def _gelu(node, emit):
    """x * cdf(x), with cdf as ops_elementwise._gelu_vjp computes it (the same nodes)."""
    x = node.inputs[0]
    if node.attrs.get("approximate", "none") == "tanh":
        x2 = emit("mul", [x, x])
        inner = emit("add", [x, emit("mul", [emit("mul", [x2, 0.044715]), x])], alpha=1)
        t = emit("tanh", [emit("mul", [inner, _SQRT_2_OVER_PI])])
        cdf = emit("mul", [emit("add", [t, 1], alpha=1), 0.5])
    else:
        erf = emit("erf", [emit("mul", [x, 1 / _SQRT2])])
        cdf = emit("mul", [emit("add", [erf, 1], alpha=1), 0.5])
    return emit("mul", [x, cdf])


def _addmm(node, emit):
    """beta * self + alpha * (mat1 @ mat2), as the impl computes it."""
    bias, a, b = node.inputs[:3]
    beta, alpha = node.attrs.get("beta", 1), node.attrs.get("alpha", 1)
    y = emit("mm", [a, b])
    if alpha != 1:
        y = emit("mul", [y, alpha])
    if beta == 0:
        return y
    return emit("add", [y, emit("mul", [bias, beta]) if beta != 1 else bias], alpha=1)


RULES = {"layer_norm": _layer_norm, "gelu": _gelu, "addmm": _addmm}


def _applies(node):
    x = node.inputs[0] if node.inputs else None
    out = node.outputs[0] if node.outputs else None
    if node.op not in RULES or not isinstance(x, Value) or x.type.dtype not in FLOATS \
            or out.type.dtype != x.type.dtype or not all(n > 0 for n in out.type.shape) \
            or any(isinstance(v, Value) and v.type.dtype != x.type.dtype
                   for v in node.inputs[1:]):
        return False
    # (addmm's self broadcasts to the product's shape; the others keep their input's)
    return node.op == "addmm" or out.type.shape == x.type.shape


def decompose_norms(graph):
    """graph with each float layer_norm written as primitive ops (a new Graph; the input
    graph is unchanged). Returns graph itself when there is nothing to decompose."""
    if not any(_applies(n) for n in graph.nodes):
        return graph
    nodes, subst = [], {}
    for n in graph.nodes:
        if not _applies(n):
            nodes.append(n)
            continue
        y = RULES[n.op](n, _Emitter(nodes, n.loc))
        if y.type.strides != n.outputs[0].type.strides:
            y = _Emitter(nodes, n.loc)("contiguous", [y])
        subst[n.outputs[0]] = y
    return _rebuild(graph, nodes, subst)
