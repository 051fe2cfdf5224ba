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
784 x 128 weight took 113 us at 21 GB/s. A batched product read only through the transpose
of its last two dims, transpose(matmul(a, b), -2, -1), is likewise matmul(b^T, a^T): attention's
backward gets dK that way (the transpose of q^T @ dS), and a `stack` of dQ, dK, dV can then
write each product straight into its block (codegen/schedule/concat.py takes no views)."""
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


def _last_two_swapped(v):
    """u when v is transpose(u, -2, -1) of a u of rank >= 3 (a view), else None."""
    n = v.node
    nd = len(v.type.shape)
    if n is None or n.op != "transpose" or nd < 3:
        return None
    if {n.attrs.get("dim0", 0) % nd, n.attrs.get("dim1", 1) % nd} == {nd - 2, nd - 1}:
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


def _transposed(v, loc):
    """(t(v)'s Value, the nodes that make it): u itself where v = t(u), else a new view."""
    u = _transpose_of(v)
    if u is not None:
        return u, []
    node = Node("t", [v], {}, [], loc, v)
    node.outputs = [Value(infer_types("t", [v.type], {})[0], node, 0)]
    return node.outputs[0], [node]


def _batched_transposed(v, loc):
    """(transpose(v, -2, -1)'s Value, the nodes that make it), as _transposed."""
    u = _last_two_swapped(v)
    if u is not None:
        return u, []
    nd = len(v.type.shape)
    attrs = {"dim0": nd - 2, "dim1": nd - 1}
    node = Node("transpose", [v], attrs, [], loc, v)
    node.outputs = [Value(infer_types("transpose", [v.type], attrs)[0], node, 0)]
    return node.outputs[0], [node]


def _swapped_product(n):
    """(the product, transposing) when n's one result is the product's transpose: a 2-D
    t(mm) or a batched matmul's last two dims swapped (both operands of rank >= 2: a vector
    operand's product has no such identity), else (None, None)."""
    if len(n.outputs) != 1:
        return None, None
    base = _transpose_of(n.outputs[0])
    if base is not None and base.node is not None and base.node.op == "mm":
        return base, _transposed
    base = _last_two_swapped(n.outputs[0])
    if base is not None and base.node is not None and base.node.op == "matmul" and \
            all(isinstance(x, Value) and len(x.type.shape) >= 2 for x in base.node.inputs):
        return base, _batched_transposed
    return None, None


def products_untransposed(graph):
    """graph with each t(mm(a, b)) (or batched transpose(matmul(a, b), -2, -1)) whose product
    has no other reader (not an output, a write-back, a guard or another view's base)
    computed as mm(t(b), t(a)) (a new Graph; graph itself when there is none). A view of
    the transpose keeps it (its layout is the view's), and so does a transpose the graph
    returns (its strides are eager's)."""
    readers, views = {}, {}
    for n in graph.nodes:
        for x in set(x for x in n.inputs if isinstance(x, Value)):
            readers[x] = readers.get(x, 0) + 1
        if n.view_of is not None:
            views[n.view_of] = views.get(n.view_of, 0) + 1
    kept = set(graph.outputs) | set(graph.mutated.values()) | {g.value for g in graph.guards}
    nodes, subst = [], {}
    for n in graph.nodes:
        base, swap = _swapped_product(n)
        product = base.node if base is not None else None
        if product is None or readers.get(base) != 1 or base in kept \
                or n.outputs[0] in kept or views.get(base) != 1 or n.outputs[0] in views or \
                (product.op == "mm" and any(len(x.type.shape) != 2 for x in product.inputs)) \
                or base.type.dtype not in ("float32", "float64"):
            nodes.append(n)
            continue
        a, b = product.inputs
        tb, made_b = swap(b, n.loc)
        ta, made_a = swap(a, n.loc)
        mm = Node(product.op, [tb, ta], dict(product.attrs), [], product.loc)
        mm.outputs = [Value(TensorType(base.type.dtype, n.outputs[0].type.shape), mm, 0,
                            n.outputs[0].name)]
        nodes += made_b + made_a + [mm]
        subst[n.outputs[0]] = mm.outputs[0]
    return dce(_rebuild(graph, nodes, subst)) if subst else graph
