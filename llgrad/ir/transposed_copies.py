"""A matrix product's operand that is the transpose of a copy of a transpose, t(clone(t(x))),
holds x's values: the product reads x itself (a product's result does not depend on its
operands' layouts).

Where it comes from: a layer that lays a weight out once for its forward products (the
recurrent layers' `W_hh.t().contiguous()`, so BLAS reads B row-major at every step) gets,
from autograd, backward products of that copy transposed back: BLAS would read it
transposed at every step (ops_matmul.py packs such a B into row-major again on each call),
when x itself is the row-major matrix wanted. And the copy need no longer be saved for the
backward when the joint graph is rewritten before it is partitioned."""
from .graph import Node, Value
from .passes import _rebuild, dce

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
