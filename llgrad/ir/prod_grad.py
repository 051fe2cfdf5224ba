"""prod's VJP as PyTorch's prod_backward computes it (FunctionsManual.cpp).

Where the input holds no zero the gradient is g * result / x. Once it holds a zero anywhere,
every element's derivative is the product of the other elements of its slice, taken as
exclusive cumulative products from both ends (prod_safe_zeros_backward), in every slice:
so a NaN or inf in a slice without zeros gets the product of the others (finite where they
are), not result / x (NaN). The choice between the two is a select on a count of the
zeros, not a Python branch, so a traced backward serves inputs with and without zeros
(eager branches, and computes one formula). A full reduction's gradient with two zeros or
more is zeros, as PyTorch's, but under create_graph (the exclusive products: 0, or NaN
beside an inf or NaN).
Written with the Tensor API, so it serves eager autograd, the tracer and double backward.
Complex inputs (no complex cumprod yet) keep the quotient with the zero cases written out
(_complex_at): PyTorch's numbers but where a NaN or inf meets a zero."""


def exclusive_prods(x, dims):
    """The product of the other elements of each element's slice over dims (a tuple), in
    x's shape."""
    shape = tuple(x.shape)
    kept = [d for d in range(len(shape)) if d not in dims]
    order = kept + list(dims)
    rows = x.permute(*order).reshape(*[shape[d] for d in kept], -1)
    last = len(kept)
    ones = rows.new_ones((*rows.shape[:-1], 1))
    before = ones._op("cat", rows[..., :-1], dim=last).cumprod(last)
    after = ones._op("cat", rows[..., 1:].flip(last), dim=last).cumprod(last).flip(last)
    inverse = [order.index(d) for d in range(len(shape))]
    return (before * after).reshape(*[shape[d] for d in order]).permute(*inverse)


def prod_vjp(c, g, unreduce, conj):
    x, shape = c.self, c.shape(0)
    if len(shape) == 0:
        return (g,)
    if x.numel() == 0:
        return (unreduce(g, shape, c.dim, c.keepdim),)
    dims = tuple(c.dim) if c.dim is not None else tuple(range(len(shape)))
    r = unreduce(c.result, shape, c.dim, c.keepdim)
    gk = unreduce(g, shape, c.dim, c.keepdim)
    if x.is_complex():
        return (gk * conj(_complex_at(x, r, dims)),)
    zero = x == 0
    zeros = zero.sum()
    # a full reduction with two zeros or more: PyTorch's plain backward gives zeros (an
    # exclusive product is 0 then, or NaN beside an inf or NaN); under create_graph the
    # exclusive products
    full_plain = c.dim is None and not getattr(c, "building_graph", False)
    if not getattr(c, "recorded", True):     # (eager: PyTorch's branch, one formula computed)
        n = int(zeros)
        if n == 0:
            return (gk * conj(r / x),)
        if full_plain and n > 1:
            return (x.new_zeros(shape),)
        return (gk * conj(exclusive_prods(x, dims)),)
    # (x where nonzero: the unselected quotient stays finite, so its derivative is too)
    quotient = r / x.where(zero.logical_not(), 1)
    others = exclusive_prods(x, dims)
    if full_plain:
        others = others.where((zeros > 1).logical_not(), 0)
    return (gk * conj(others.where(zeros > 0, quotient)),)


def _complex_at(x, r, dims):
    """The derivative r / x where x is nonzero; at a zero the product of the others: p (the
    product of the slice's nonzero elements) when it is the slice's only zero; with exactly
    two zeros the other zero times p, written (sum of the slice's zeros - x) * p so that it
    is 0 in value but has the right derivative (double backward); with more zeros 0."""
    nonzero = x != 0
    zero = nonzero.logical_not()
    nzero = zero.sum(dims, keepdim=True)
    p = x.where(nonzero, 1)._op("prod", dim=dims, keepdim=True)   # (several dims: the op)
    other_zero = x.where(zero, 0).sum(dims, keepdim=True) - x
    at_zero = p.where(nzero == 1, 0) + (other_zero * p).where(nzero == 2, 0)
    return (r / x.where(nonzero, 1)).where(nonzero, at_zero)
