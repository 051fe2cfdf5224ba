"""Transposes around matrix products, which BLAS reads either way round at no cost.

A product's operand that is the transpose of a copy of a transpose, t(clone(t(x))), holds
x's values: the product reads x itself (a product's result does not depend on its
operands' layouts).

Where it comes from: a layer that lays a weight out once for its forward products (the
recurrent layers' `W_hh.t().contiguous()`, so BLAS reads B row-major at every step) gets,
from autograd, backward products of that copy transposed back: BLAS would read it
transposed at every step (ops_matmul.py packs such a B into row-major again on each call),
when x itself is the row-major matrix wanted. And the copy need no longer be saved for the
backward when the joint graph is rewritten before it is partitioned.

A product read only through its transpose, t(mm(a, b)), is computed as mm(t(b), t(a)): the
same matrix, laid out row-major where the view had it column-major. Where it comes from:
every Linear's weight gradient (autograd's product for t(W) is x^T @ g, and W's gradient its
transpose), whose consumers (the copy into .grad, an optimiser's update fused with it) then
read it along rows instead of one element per cache line: an MNIST MLP's SGD update of a
784 x 128 weight took 113 us at 21 GB/s. The same for a batched product read only through
the transpose of its last two dims (maybe behind same-shape views): bmm(t(b), t(a)), and
matmul's likewise. Where it comes from: einsum('bid,bjd->bij', q, k)'s gradient for k,
bmm(q^T, g) as (b, d, j) read as (b, j, d) by every sum and copy after it (Slot Attention's
keys: the adds of the iterations' gradients and the Linear's copy ran at under 2 GB/s,
transposing 4 MB each); attention's backward gets dK as the transpose of matmul(q^T, dS),
and a `stack` of dQ, dK, dV can then write each product straight into its block
(codegen/schedule/concat.py takes no views)."""
from .graph import Node, TensorType, Value
from .passes import _rebuild, dce
from .shape_rules import infer_types

# the positions of the operands each product reads as matrices
PRODUCTS = {"mm": (0, 1), "addmm": (1, 2), "matmul": (0, 1)}


def _transpose_of(v):
    """u when v is u's 2-D transpose (a view), else None."""
    n = v.node
    if n is None or len(v.type.shape) != 2:
        return None
    if n.op == "t" or (n.op == "transpose" and
                       {n.attrs.get("dim0", 0) % 2, n.attrs.get("dim1", 1) % 2} == {0, 1}):
        return n.inputs[0]
    return None


def _original(v):
    """x when v = t(clone(t(x))) with x of v's shape and dtype, else None."""
    copy = _transpose_of(v)
    if copy is None or copy.node is None or copy.node.op != "clone":
        return None
    source = copy.node.inputs[0]
    if not isinstance(source, Value):
        return None
    x = _transpose_of(source)
    if x is None or x.type.shape != v.type.shape or x.type.dtype != v.type.dtype:
        return None
    return x


def read_untransposed(graph):
    """graph with each product operand t(clone(t(x))) read as x (a new Graph, dead copies
    dropped; graph itself when there is none)."""
    nodes, changed = [], False
    for n in graph.nodes:
        positions = PRODUCTS.get(n.op, ())
        inputs = list(n.inputs)
        for k in positions:
            x = _original(inputs[k]) if k < len(inputs) and isinstance(inputs[k], Value) \
                else None
            if x is not None:
                inputs[k] = x
        if inputs != n.inputs:
            n = Node(n.op, inputs, n.attrs, n.outputs, n.loc, n.view_of)
            changed = True
        nodes.append(n)
    return dce(_rebuild(graph, nodes)) if changed else graph


def _batch_transpose_of(v):
    """u when v is the transpose of u's last two dims, u 3-D (a view), else None."""
    n = v.node
    if n is None or len(v.type.shape) != 3:
        return None
    if n.op == "transpose" and {n.attrs.get("dim0", 0) % 3, n.attrs.get("dim1", 1) % 3} \
            == {1, 2}:
        return n.inputs[0]
    if n.op == "permute" and tuple(d % 3 for d in n.attrs.get("dims", ())) == (0, 2, 1):
        return n.inputs[0]
    return None


def _last_two_swapped(v):
    """u when v is transpose(u, -2, -1) of a u of rank >= 3 (a view), else None."""
    n = v.node
    nd = len(v.type.shape)
    if n is None or n.op != "transpose" or nd < 3:
        return None
    if {n.attrs.get("dim0", 0) % nd, n.attrs.get("dim1", 1) % nd} == {nd - 2, nd - 1}:
        return n.inputs[0]
    return None


# the product ops rewritten: (the transpose-of test, the new transpose view's op, its attrs
# for a value of rank nd)
_FLIPS = {"mm": (_transpose_of, "t", lambda nd: {}),
          "bmm": (_batch_transpose_of, "transpose", lambda nd: {"dim0": 1, "dim1": 2}),
          "matmul": (_last_two_swapped, "transpose",
                     lambda nd: {"dim0": nd - 2, "dim1": nd - 1})}
# views that keep a value's shape and strides: they stand between a product and its transpose
_SAME = ("view", "_reshape_alias", "_unsafe_view", "reshape")


def _transposed(v, loc, op="mm"):
    """(the transpose of v's matrices, the nodes that make it): u itself where v is u's
    transpose, else a new view."""
    test, view, attrs_of = _FLIPS[op]
    u = test(v)
    if u is not None:
        return u, []
    attrs = attrs_of(len(v.type.shape))
    node = Node(view, [v], attrs, [], loc, v)
    node.outputs = [Value(infer_types(view, [v.type], attrs)[0], node, 0)]
    return node.outputs[0], [node]


def _product_behind(v, readers, views, kept):
    """The mm or bmm node whose result v is, through same-shape views each read by the next
    alone (then v's transpose is the only reader of the product), else None."""
    while v.node is not None and v.node.op in _SAME:
        u = v.node.inputs[0]
        if not isinstance(u, Value) or u.type != v.type or readers.get(u) != 1 or \
                views.get(u) != 1 or u in kept:
            return None
        v = u
    return v.node if v.node is not None and v.node.op in _FLIPS else None


def uses(graph):
    """(readers: value -> how many nodes read it, views: value -> how many views it is the
    base of, kept: the values the graph returns, writes back or guards)."""
    readers, views = {}, {}
    for n in graph.nodes:
        for x in set(x for x in n.inputs if isinstance(x, Value)):
            readers[x] = readers.get(x, 0) + 1
        if n.view_of is not None:
            views[n.view_of] = views.get(n.view_of, 0) + 1
    kept = set(graph.outputs) | set(graph.mutated.values()) | {g.value for g in graph.guards}
    return readers, views, kept


def _rank_refused(op, x, out):
    """Whether operand x's rank keeps op's product from being computed transposed: mm's
    and bmm's have out's; matmul's need rank >= 2 (broadcast batches transpose alike, a
    vector operand's product has no such identity)."""
    return len(x.type.shape) < 2 if op == "matmul" else len(x.type.shape) != len(out.type.shape)


def products_untransposed(graph):
    """graph with each t(mm(a, b)) (a batched bmm's or matmul's transpose of the last two
    dims alike) whose product has no other reader (not an output, a write-back, a guard or
    another view's base) computed as mm(t(b), t(a)) (a new Graph;
    graph itself when there is none). A view of the transpose keeps it (its layout is the
    view's), and so does a transpose the graph returns (its strides are eager's)."""
    readers, views, kept = uses(graph)
    nodes, subst = [], {}
    for n in graph.nodes:
        out = n.outputs[0] if len(n.outputs) == 1 else None
        base = None if out is None else \
            _transpose_of(out) or _batch_transpose_of(out) or _last_two_swapped(out)
        product = None if base is None else _product_behind(base, readers, views, kept)
        if product is None or _FLIPS[product.op][0](out) is not base or \
                readers.get(base) != 1 or base in kept or out in kept or \
                views.get(base) != 1 or out in views or \
                any(not isinstance(x, Value) or _rank_refused(product.op, x, out)
                    for x in product.inputs) or base.type.dtype not in ("float32", "float64"):
            nodes.append(n)
            continue
        a, b = product.inputs
        tb, made_b = _transposed(b, n.loc, product.op)
        ta, made_a = _transposed(a, n.loc, product.op)
        mm = Node(product.op, [tb, ta], dict(product.attrs), [], product.loc)
        mm.outputs = [Value(TensorType(base.type.dtype, n.outputs[0].type.shape), mm, 0,
                            n.outputs[0].name)]
        nodes += made_b + made_a + [mm]
        subst[n.outputs[0]] = mm.outputs[0]
    return dce(_rebuild(graph, nodes, subst)) if subst else graph
