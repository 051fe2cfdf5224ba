"""The layout of a new .grad: its leaf's strides where the leaf's memory is dense (no gaps, no
overlap, in any order of dimensions), else contiguous (PyTorch's AccumulateGrad contract)."""


def laid_out_as(g, leaf):
    """A new tensor of g's values in the layout a new .grad of leaf has, made with tensor ops
    (so that a trace of a training step records them)."""
    shape, strides = tuple(leaf.shape), leaf.stride()
    order = sorted(range(len(shape)), key=lambda d: -strides[d])    # outermost first
    dense, expect = True, 1
    for d in reversed(order):
        if shape[d] != 1 and strides[d] != expect:
            dense = False
            break
        expect *= shape[d]
    if not dense or leaf.is_contiguous():
        c = g.contiguous()
    elif all(n == 1 or a == b for n, a, b in zip(shape, g.stride(), strides)):
        c = g                                   # (laid out so already: a copy of it)
    else:
        inverse = sorted(range(len(order)), key=order.__getitem__)
        c = g.permute(order).contiguous().permute(inverse)
    return g.clone() if c is g else c


def new_grad_order(a):
    """The order= of np.empty_like(a) that gives a new .grad of a leaf whose data is a the
    layout above: "K" (a's own) where a's memory is dense, else "C" (an expanded leaf's
    np.empty_like would take an order of its stride-0 dims)."""
    if a.flags.c_contiguous:
        return "K"
    dims = sorted((abs(s) // a.itemsize, n) for n, s in zip(a.shape, a.strides) if n != 1)
    expect = 1
    for s, n in dims:
        if s != expect:
            return "C"
        expect *= n
    return "K"
