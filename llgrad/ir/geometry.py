"""Strided geometry: a geometry is (shape, strides, offset) in elements over a flat buffer,
as a tensor view addresses its storage. Shared by the strided ops, view VJPs, the tracer's
alias handling and native code's addressing."""


def contiguous_strides(shape):
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(strides))


def geometry_overlaps(shape, strides):
    dims = sorted((abs(s), n) for n, s in zip(shape, strides) if n > 1)
    extent = 1
    for s, n in dims:
        if s < extent:
            return True
        extent = s * (n - 1) + extent
    return False


def geometry_span(shape, strides, offset):
    if any(n == 0 for n in shape):
        return offset
    return offset + 1 + sum((n - 1) * s for n, s in zip(shape, strides))


def fast_to_slow(shape, strides):
    """Dimensions from fastest to slowest varying, as infer_dense_strides orders them (an
    insertion sort; a stride-0 dimension is ambiguous and keeps its place; equal strides
    put the smaller size first)."""
    def should_swap(d0, d1):
        s0, s1 = strides[d0], strides[d1]
        if s0 == 0 or s1 == 0:
            return 0
        if s0 != s1:
            return -1 if s0 < s1 else 1
        return 1 if shape[d0] > shape[d1] else 0

    return _sorted_dims(len(shape), should_swap)


def _sorted_dims(nd, should_swap):
    """Dims nd-1 .. 0 insertion-sorted by should_swap(d0, d1) (> 0: swap, < 0: stop, 0: keep
    looking), as PyTorch's TensorIterator and infer_dense_strides sort them."""
    perm = list(range(nd))[::-1]
    for i in range(1, nd):
        d1 = i
        for d0 in range(i - 1, -1, -1):
            cmp = should_swap(perm[d0], perm[d1])
            if cmp > 0:
                perm[d0], perm[d1] = perm[d1], perm[d0]
                d1 = d0
            elif cmp < 0:
                break
    return perm


def broadcasts_to(small, shape):
    """Whether shape `small` broadcasts to exactly `shape` (np.broadcast_shapes(small, shape)
    == shape), without NumPy's ~5 us: every trailing size equal or 1."""
    if small == shape:
        return True
    n = len(small)
    if n > len(shape):
        return False
    for a, b in zip(small, shape[len(shape) - n:]):
        if a != b and a != 1:
            return False
    return True


def iterator_strides(shape, operands):
    """The strides PyTorch's TensorIterator gives the result of an elementwise op over
    operands [(shape, strides)] broadcast to shape, or None for row-major: row-major when
    every operand is contiguous, else dense in the order of the first operand that tells
    two dimensions apart (a broadcast dimension, stride 0, tells nothing; equal strides put
    the smaller size first). Sizes 1 excepted, where PyTorch's choice varies by op."""
    if all(tuple(sh) == tuple(shape) and _row_major(sh, st) for sh, st in operands):
        return None
    out, acc = [0] * len(shape), 1
    for d in iterator_dims(shape, operands):
        out[d] = acc
        acc *= shape[d]
    return tuple(out)


def iterator_dims(shape, operands):
    """The dims of shape, innermost first, in the order PyTorch's TensorIterator nests its
    loop over operands [(shape, strides)] broadcast to shape (iterator_strides)."""
    nd = len(shape)
    ops = []
    for sh, st in operands:
        k = nd - len(sh)
        ops.append([0] * k + [0 if n == 1 and shape[k + i] != 1 else s
                              for i, (n, s) in enumerate(zip(sh, st))])

    def should_swap(d0, d1):
        for st in ops:
            s0, s1 = st[d0], st[d1]
            if s0 == 0 or s1 == 0:
                continue
            if s0 != s1:
                return -1 if s0 < s1 else 1
            if shape[d0] > shape[d1]:
                return 1
        return 0

    return _sorted_dims(nd, should_swap)


def _row_major(shape, strides):
    acc = 1
    for n, s in zip(reversed(shape), reversed(strides)):
        if n != 1:
            if s != acc:
                return False
            acc *= n
    return True


def expand_strides(shape, strides, size, unit=1):
    """PyTorch's strides of a (shape, strides) tensor expanded to size (its
    inferExpandGeometry; unit: one element's stride): a kept dim keeps its stride (size 1
    too, where NumPy gives 0), a new size-1 dim gets the next dim's extent, a broadcast dim
    0, and a 0-d tensor's expansion all 0."""
    lead, out, nxt = len(size) - len(shape), [0] * len(size), unit
    for i in range(len(size) - 1, -1, -1) if shape else ():
        n, s = (shape[i - lead], strides[i - lead]) if i >= lead else (1, nxt)
        t = n if size[i] == -1 else size[i]
        out[i] = s if t == n else 0
        nxt = out[i] * t
    return tuple(out)


def unsqueeze_strides(shape, strides, dim, unit=1):
    """PyTorch's strides after unsqueeze(dim): the new dim's is the extent of the dim it
    precedes (unit past the last), the others kept (NumPy recomputes size-1 dims')."""
    new = shape[dim] * strides[dim] if dim < len(shape) else unit
    return tuple(strides[:dim]) + (new,) + tuple(strides[dim:])


def view_strides(shape, strides, new_shape):
    """PyTorch's strides of a view of a (shape, strides) tensor with at least one element
    as new_shape (its computeStride; NumPy's reshape gives size-1 dims others), or None
    when it is not viewable."""
    out, vd, chunk, tn, vn = [0] * len(new_shape), len(new_shape) - 1, strides[-1], 1, 1
    for td in range(len(shape) - 1, -1, -1):
        tn *= shape[td]
        if td == 0 or shape[td - 1] != 1 and strides[td - 1] != tn * chunk:
            while vd >= 0 and (vn < tn or new_shape[vd] == 1):
                out[vd] = vn * chunk
                vn *= new_shape[vd]
                vd -= 1
            if vn != tn:
                return None
            if td > 0:
                chunk, tn, vn = strides[td - 1], 1, 1
    return None if vd != -1 else tuple(out)
