"""Max pooling as PyTorch runs it: max_pool2d_with_indices (MaxPool2DWithIndicesBackward0)
and its backward, max_pool2d_with_indices_backward (MaxPool2DWithIndicesBackwardBackward0).

The forward pools the last two dims of a (..., H, W) input (F.max_pool2d passes 3-D or
4-D; vmap adds leading dims) with kernel_size, stride, padding, dilation (pairs) and
ceil_mode, and gives the values and the indices: the flat position h * W + w in the input
plane of each window's maximum. As in PyTorch's CPU kernel, a window is read in row-major
order, starting from -inf (the dtype's lowest for integers) at its first position inside
the input; an element replaces the best when it is greater or NaN: the first maximum wins,
or the last NaN of the window (NaN propagates). The padding is never read (never wins).

The backward scatters the gradient into zeros of the input's shape at the indices, adding
where windows overlap (in the order of the outputs, as native code does); its own VJP,
for double backward, gathers the incoming gradient at the indices (the input gets none:
the indices are piecewise constant in it). `self` is an operand of the backward for its
shape only, as in PyTorch (its edge in next_functions is PyTorch's)."""
import numpy as np

from .optable import defop


def out_size(n, k, pad, stride, dilation, ceil_mode):
    """PyTorch's pooling output length of one dim (ceil_mode: the last window must start
    inside the input or its left padding)."""
    out = (n + 2 * pad - dilation * (k - 1) - 1 + (stride - 1 if ceil_mode else 0)) \
        // stride + 1
    if ceil_mode and (out - 1) * stride >= n + pad:
        out -= 1
    return out


def valid_outputs(o, n, stride, pad, at):
    """[lo, hi): the outputs 0 <= i < o whose window element at offset `at` (kernel
    position times dilation) reads inside the input, 0 <= i * stride - pad + at < n."""
    lo = max(0, -(-(pad - at) // stride))
    hi = min(o, (n - 1 + pad - at) // stride + 1) if n - 1 + pad - at >= 0 else 0
    return lo, max(lo, hi)


def _windows(x, kernel_size, stride, padding, dilation, ceil_mode):
    """(oh, ow, [(k, output slices, input slice)], complete): each kernel offset k
    (row-major) with the outputs whose window reads inside the input there and the
    strided slice of x they read; complete: every window reads something."""
    h, w = x.shape[-2:]
    geom = list(zip((h, w), kernel_size, stride, padding, dilation))
    oh, ow = (out_size(n, k, p, s, d, ceil_mode) for n, k, s, p, d in geom)
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = kernel_size, stride, padding, dilation
    parts, seen = [], (np.zeros(oh, bool), np.zeros(ow, bool))
    for i in range(kh):
        rlo, rhi = valid_outputs(oh, h, sh, ph, i * dh)
        r0 = rlo * sh - ph + i * dh
        seen[0][rlo:rhi] = True
        for j in range(kw):
            clo, chi = valid_outputs(ow, w, sw, pw, j * dw)
            seen[1][clo:chi] = True
            if rlo == rhi or clo == chi:
                continue
            c0 = clo * sw - pw + j * dw
            src = x[..., r0:r0 + (rhi - rlo - 1) * sh + 1:sh, c0:c0 + (chi - clo - 1) * sw + 1:sw]
            parts.append((i * kw + j, (Ellipsis, slice(rlo, rhi), slice(clo, chi)), src))
    return oh, ow, parts, bool(seen[0].all() and seen[1].all())


def _lowest(dtype):
    if dtype.kind == "f":
        return -np.inf
    return False if dtype.kind == "b" else np.iinfo(dtype).min


def _max_pool2d(x, kernel_size, stride, padding, dilation, ceil_mode):
    # Whole-array passes per kernel offset, no branches per element (a masked copy or
    # np.where with a mixed mask is ~8x slower): the values by np.maximum (NaN propagates;
    # at a tie it keeps its second operand, the earlier element), then which offset gave
    # them: the first equal one (the largest score K - k), or in a NaN window the last NaN
    oh, ow, parts, complete = _windows(x, kernel_size, stride, padding, dilation, ceil_mode)
    lead = x.shape[:-2]
    best = np.full(lead + (oh, ow), _lowest(x.dtype), dtype=x.dtype)
    for _, out, src in parts:
        np.maximum(src, best[out], out=best[out])
    kk = kernel_size[0] * kernel_size[1]
    st = np.min_scalar_type(kk + 1)
    score = np.zeros(best.shape, dtype=st)
    for k, out, src in parts:
        np.maximum(score[out], (src == best[out]) * st.type(kk - k), out=score[out])
    if x.dtype.kind == "f":
        nan = np.isnan(best)
        if nan.any():
            last = np.zeros(best.shape, dtype=st)
            for k, out, src in parts:
                np.maximum(last[out], np.isnan(src) * st.type(k + 1), out=last[out])
            score = np.where(nan, st.type(kk + 1) - last, score)
    (kw, sh, sw), (ph, pw), (dh, dw) = (kernel_size[1],) + tuple(stride), padding, dilation
    w = x.shape[-1]
    # the flat index: the window's start plus its offset k's, looked up by score (integer
    # division of the whole array by kw would cost more than all the passes above)
    ks = kk - np.arange(kk + 1)
    table = (ks // kw) * dh * w + (ks % kw) * dw
    start = (np.arange(oh, dtype=np.int64) * sh - ph)[:, None] * w \
        + np.arange(ow, dtype=np.int64) * sw - pw
    idx = table.take(score) + start
    if not complete:
        # some window may read nothing (dilation over the padding, or a window past the
        # input): PyTorch's index is then its start, moved into the input by dilations
        # (past the plane's end too, where the backward drops it)
        starts = [first_inside(o, s_, p_, d_) for o, s_, p_, d_ in
                  ((oh, sh, ph, dh), (ow, sw, pw, dw))]
        empty = (score == 0) if x.dtype.kind != "f" else (score == 0) & ~np.isnan(best)
        idx = np.where(empty, starts[0][:, None] * w + starts[1], idx)
    return best, idx


def first_inside(o, stride, pad, dilation):
    """Each output's first window position at or after 0 along one dim (PyTorch's start:
    the window's start moved past the padding in steps of the dilation)."""
    start = np.arange(o, dtype=np.int64) * stride - pad
    return np.where(start < 0, start + (-start + dilation - 1) // dilation * dilation, start)


def overlapping(kernel_size, stride, dilation):
    """Whether windows can share input positions (then the backward adds)."""
    return any(s < d * (k - 1) + 1 for k, s, d in zip(kernel_size, stride, dilation))


def _max_pool2d_backward(grad, x, indices, kernel_size, stride, padding, dilation,
                         ceil_mode):
    h, w = x.shape[-2:]
    planes = int(np.prod(x.shape[:-2], dtype=np.int64))
    out = np.zeros(planes * h * w, dtype=grad.dtype)
    if grad.size:
        idx = np.asarray(indices).reshape(planes, -1)
        g = np.asarray(grad).reshape(planes, -1)
        inside = (idx >= 0) & (idx < h * w)
        if not inside.all():            # (a window that read nothing: see _max_pool2d)
            g = np.where(inside, g, 0)
            idx = np.where(inside, idx, 0)
        at = (idx + np.arange(planes, dtype=np.int64)[:, None] * (h * w)).reshape(-1)
        g = g.reshape(-1)
        if overlapping(kernel_size, stride, dilation):
            np.add.at(out, at, g)       # in C order: the native kernel's order of adds
        else:       # every input position in one window at most: a store, of g + 0 (a
            out[at] = g + 0.0       # -0 gradient lands as +0, as PyTorch's adds into zeros)
    return out.reshape(x.shape)


def _max_pool2d_vjp(c, gs):
    return (gs[0]._op("max_pool2d_with_indices_backward", c.self, c.result1, **c.attrs),)


def _max_pool2d_backward_vjp(c, g):
    """d/d grad: the incoming gradient read at the indices (a gather per plane)."""
    idx = c.indices
    shape, ishape = tuple(g.shape), tuple(idx.shape)
    flat = g.reshape(shape[:-2] + (shape[-2] * shape[-1],))
    at = idx.reshape(ishape[:-2] + (ishape[-2] * ishape[-1],))
    # d/d self: zeros, as PyTorch's (not None: a third derivative reaches the input)
    zero = g.new_zeros(c.shape(1)) if c.needs(1) else None
    return (flat.gather(len(shape) - 2, at).reshape(ishape), zero, None)


defop("max_pool2d_with_indices", _max_pool2d, nout=2, save=("self", "result1"),
      grad_fn="MaxPool2DWithIndicesBackward0", vjp=_max_pool2d_vjp, eager_kernel="shaped")
defop("max_pool2d_with_indices_backward", _max_pool2d_backward,
      args=("grad", "self", "indices"), save=("indices",), nondiff=("indices",),
      grad_fn="MaxPool2DWithIndicesBackwardBackward0", vjp=_max_pool2d_backward_vjp,
      eager_kernel="shaped")
