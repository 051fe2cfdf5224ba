"""Padding, average pooling and group normalisation as PyTorch runs them: one op each, with
PyTorch's backward node (ConstantPadNdBackward0, ReflectionPad{1,2,3}DBackward0,
ReplicationPad{1,2,3}DBackward0, AvgPool2DBackward0, NativeGroupNormBackward0).

Native code runs the pads and group_norm as their decompositions into primitive ops: a
constant pad is a filled buffer with the input put into it (strided_put), a
reflect/replicate pad one index_select per padded dim, group_norm layer_norm's primitives
over (N, G, C/G * ...). `pad` attributes are in PyTorch's order: (left, right) of the last
dim first.

avg_pool2d (over the last two dims of (..., H, W)) and its backward, avg_pool2d_backward
(AvgPool2DBackwardBackward0), have native kernels (codegen/lowerings/ops_avgpool.py). The
backward spreads each gradient / its window's divisor over the window, adding where windows
overlap; as in PyTorch it takes the input for its shape only (its gradient there is zeros),
and its VJP is avg_pool2d of the incoming gradient (it is linear)."""
import numpy as np

from .geometry import contiguous_strides
from .ops_pool import _windows
from .optable import defop


def _numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def pad_pairs(ndim, pad):
    """[(dim, before, after)] of a PyTorch pad tuple, the last dim first."""
    return [(ndim - 1 - i, pad[2 * i], pad[2 * i + 1]) for i in range(len(pad) // 2)]


def _constant(emit, arr):
    arr = np.asarray(arr)
    return emit("constant", [], value=arr.tolist(), dtype=arr.dtype.name)


# ---- constant_pad_nd -----------------------------------------------------------------------

def _crop(x, pad):
    """x with the negative pads cut off (a view)."""
    idx = [slice(None)] * x.ndim
    for d, lo, hi in pad_pairs(x.ndim, pad):
        idx[d] = slice(max(-lo, 0), x.shape[d] - max(-hi, 0))
    return x[tuple(idx)]


def _constant_pad(x, pad, value=0):
    x = _crop(x, pad)
    shape, idx = list(x.shape), [slice(None)] * x.ndim
    for d, lo, hi in pad_pairs(x.ndim, pad):
        shape[d] += max(lo, 0) + max(hi, 0)
        idx[d] = slice(max(lo, 0), max(lo, 0) + x.shape[d])
    out = np.full(shape, value, dtype=x.dtype)
    out[tuple(idx)] = x
    return out


def _constant_pad_primitives(node, emit):
    x, pad = node.inputs[0], node.attrs["pad"]
    shape = x.type.shape
    for d, lo, hi in pad_pairs(len(shape), pad):
        if lo < 0 or hi < 0:
            x = emit("slice", [x], dim=d, start=max(-lo, 0), end=shape[d] - max(-hi, 0), step=1)
    out = node.outputs[0].type
    strides = contiguous_strides(out.shape)
    offset = sum(max(lo, 0) * strides[d] for d, lo, _ in pad_pairs(len(shape), pad))
    buf = emit("full", [], shape=(_numel(out.shape),), value=node.attrs.get("value", 0),
               dtype=out.dtype)
    put = emit("strided_put", [buf, x], geom=(tuple(x.type.shape), strides, offset))
    return emit("view", [put], shape=out.shape)


defop("constant_pad_nd", _constant_pad, grad_fn="ConstantPadNdBackward0",
      vjp=lambda c, g: (g._op("constant_pad_nd", pad=tuple(-p for p in c.pad), value=0),),
      decompose=_constant_pad_primitives, complex=True,
      decompose_dtypes=("float32", "float64", "int64", "int32", "int16", "int8", "uint8",
                        "bool"))   # (its primitives only move elements)


# ---- reflection_pad, replication_pad -------------------------------------------------------

def pad_index(n, lo, hi, mode):
    """The input index each output position of a padded dim reads (lo/hi < 0 crop)."""
    i = np.arange(-lo, n + hi)
    if mode == "reflect":
        i = np.abs(i)
        i = np.where(i >= n, 2 * (n - 1) - i, i)
    elif mode == "replicate":
        i = np.clip(i, 0, n - 1)
    else:
        i = i % n
    return i.astype(np.int64)


def _index_pad(mode):
    def impl(x, pad):
        for d, lo, hi in pad_pairs(x.ndim, pad):
            x = np.take(x, pad_index(x.shape[d], lo, hi, mode), axis=d)
        return x

    def vjp(c, g):
        shape = list(c.shape(0))
        steps = []
        for d, lo, hi in pad_pairs(len(shape), c.pad):
            steps.append((d, tuple(shape), pad_index(shape[d], lo, hi, mode)))
            shape[d] += lo + hi
        for d, in_shape, idx in reversed(steps):
            g = g.new_zeros(in_shape).index_add(d, g.new_tensor(idx, dtype="int64"), g)
        return (g,)

    def primitives(node, emit):
        x = node.inputs[0]
        for d, lo, hi in pad_pairs(len(x.type.shape), node.attrs["pad"]):
            idx = pad_index(x.type.shape[d], lo, hi, mode)
            x = emit("index_select", [x, _constant(emit, idx)], dim=d)
        return x
    return impl, vjp, primitives


for _op, _mode, _node in (("reflection_pad", "reflect", "ReflectionPad"),
                          ("replication_pad", "replicate", "ReplicationPad")):
    _impl, _vjp, _prims = _index_pad(_mode)
    defop(_op, _impl, vjp=_vjp, decompose=_prims,
          grad_fn=(lambda n: lambda ins, at: f"{n}{len(at['pad']) // 2}DBackward0")(_node))


# ---- avg_pool2d ------------------------------------------------------------------------------

def pool_out(size, k, pad, stride, ceil_mode):
    """PyTorch's pooling output length of one dim (no dilation)."""
    out = (size + 2 * pad - (k - 1) - 1 + (stride - 1 if ceil_mode else 0)) // stride + 1
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1
    return out


def window_count(o, n, k, stride, pad, count_include_pad):
    """PyTorch's divisor along one dim of output o (an int or an array of them): the
    window's length clipped to the padded input [-pad, n + pad), or, without
    count_include_pad, to the input itself."""
    start = o * stride - pad
    end = np.minimum(start + k, n + pad)
    if count_include_pad:
        return end - start
    return np.minimum(end, n) - np.maximum(start, 0)


def avg_geometry(h, w, kernel_size, stride, padding, ceil_mode, count_include_pad,
                 divisor_override):
    """(oh, ow, divisor): the output size and PyTorch's divisor of each window (float64)."""
    out, divs = [], []
    for n, k, s, p in zip((h, w), kernel_size, stride, padding):
        o = pool_out(n, k, p, s, ceil_mode)
        out.append(o)
        divs.append(window_count(np.arange(o), n, k, s, p, count_include_pad))
    if divisor_override:
        return out[0], out[1], np.full((out[0], out[1]), float(divisor_override))
    return out[0], out[1], np.outer(divs[0], divs[1]).astype(np.float64)


def _avg_windows(x, kernel_size, stride, padding, ceil_mode):
    """max pooling's [(k, output slices, slice of x)] per kernel offset, without dilation:
    the outputs whose window reads inside x at that offset (the zero padding is never
    read, so no padded copy is made)."""
    return _windows(x, kernel_size, stride, padding, (1, 1), ceil_mode)[2]


def _divided(acc, div):
    # floats divide in their dtype (float32 / float32 is float64 division rounded once
    # more: the same value, and native code's), integers as before in float64, truncated
    if acc.dtype.kind == "f":
        return acc / div.astype(acc.dtype)
    return acc / div


def _avg_pool2d(x, kernel_size, stride, padding, ceil_mode, count_include_pad,
                divisor_override):
    # one whole-array add per kernel offset, in row-major order from +0 (native code adds
    # a window's elements in the same order: the same float sums); the padding adds nothing
    oh, ow, div = avg_geometry(*x.shape[-2:], kernel_size, stride, padding, ceil_mode,
                               count_include_pad, divisor_override)
    # (float16 adds in float32, as PyTorch: 5000 of 1000.0 would overflow float16)
    acc = np.zeros(x.shape[:-2] + (oh, ow), dtype=np.float32 if x.dtype == np.float16 else
                   x.dtype if x.dtype.kind == "f" else np.int64)
    for _, out, src in _avg_windows(x, kernel_size, stride, padding, ceil_mode):
        acc[out] += src
    return _divided(acc, div).astype(x.dtype, copy=False)


def _avg_pool2d_backward(grad, x, kernel_size, stride, padding, ceil_mode, count_include_pad,
                         divisor_override):
    h, w = x.shape[-2:]
    oh, ow, div = avg_geometry(h, w, kernel_size, stride, padding, ceil_mode,
                               count_include_pad, divisor_override)
    if tuple(grad.shape) != tuple(x.shape[:-2]) + (oh, ow):
        raise ValueError(f"avg_pool2d_backward: a gradient of shape {tuple(grad.shape)} for "
                         f"an input of shape {tuple(x.shape)} (outputs {(oh, ow)})")
    share = _divided(grad, div).astype(grad.dtype, copy=False)
    (kh, kw), lead = kernel_size, x.shape[:-2]
    if tuple(stride) == (kh, kw) and tuple(padding) == (0, 0) and oh * kh <= h and ow * kw <= w:
        # the windows tile the plane: each position takes its one window's share, written
        # as rows (each share repeated kw times, the row kh times), not kh * kw strided adds
        # (2x faster); + 0 as the adds into zeros below give it (a -0 share lands as +0)
        share = share + share.dtype.type(0)
        out = (np.zeros if (oh * kh, ow * kw) != (h, w) else np.empty)(x.shape, share.dtype)
        rows = out[..., :oh * kh, :ow * kw].reshape(lead + (oh, kh, ow * kw))
        np.copyto(rows, np.repeat(share, kw, axis=-1)[..., :, None, :])
        return out
    out = np.zeros(x.shape, dtype=share.dtype)
    # the offsets in reverse: each input position then adds its windows' shares in the
    # order of the outputs, as PyTorch's kernel and native code do (same float sums)
    for _, at, dst in reversed(_avg_windows(out, kernel_size, stride, padding, ceil_mode)):
        dst += share[at]
    return out


def _avg_pool2d_vjp(c, g):
    return (g._op("avg_pool2d_backward", c.self, **c.attrs),)


def _avg_pool2d_backward_vjp(c, g):
    """The backward is linear in the gradient: its adjoint is the pool itself; the input,
    read for its shape only, gets zeros (PyTorch's zeros_like(self))."""
    return (g._op("avg_pool2d", **c.attrs), g.new_zeros(c.shape(1)) if c.needs(1) else None)


defop("avg_pool2d", _avg_pool2d, save=("self",), grad_fn="AvgPool2DBackward0",
      vjp=_avg_pool2d_vjp, eager_kernel="shaped")
defop("avg_pool2d_backward", _avg_pool2d_backward, args=("grad", "self"),
      grad_fn="AvgPool2DBackwardBackward0", vjp=_avg_pool2d_backward_vjp,
      eager_kernel="shaped")


# ---- group_norm ----------------------------------------------------------------------------

def _groups(shape, num_groups):
    """(N, G, C/G * spatial): the shape group_norm normalises the last dim of."""
    return (shape[0], num_groups, shape[1] // num_groups * _numel(shape[2:]))


def _group_norm(x, w, b, num_groups, eps):
    n, c = x.shape[:2]
    dt = x.dtype
    if dt == np.float16:    # (computed in float32 and rounded once, as PyTorch's kernel)
        x, w, b = (None if a is None else a.astype(np.float32) for a in (x, w, b))
    xr = x.reshape(_groups(x.shape, num_groups))
    with np.errstate(over="ignore", invalid="ignore"):   # (ndarray.mean warns as NumPy's module)
        mu = xr.mean(axis=-1, keepdims=True)
        xc = xr - mu
        var = (xc * xc).mean(axis=-1, keepdims=True)
    y = (xc / np.sqrt(var + eps)).reshape(x.shape)
    cshape = (1, c) + (1,) * (x.ndim - 2)
    if w is not None:
        y = y * w.reshape(cshape)
    if b is not None:
        y = y + b.reshape(cshape)
    return y.astype(dt, copy=False)


def _group_norm_vjp(c, g):
    x, w = c.self, c.weight
    half = x.element_size() == 2    # (float16: computed in float32, as the forward)
    if half:
        x, w, g = x.float(), None if w is None else w.float(), g.float()
    ch = x.shape[1]
    groups = _groups(tuple(x.shape), c.num_groups)
    cshape = (1, ch) + (1,) * (x.ndim - 2)
    xr = x.reshape(groups)
    mu = xr.mean(-1, keepdim=True)
    xc = xr - mu
    rstd = ((xc * xc).mean(-1, keepdim=True) + c.eps).rsqrt()
    xhat = xc * rstd
    gr = (g * w.reshape(cshape) if w is not None else g).reshape(groups)
    gx = rstd * (gr - gr.mean(-1, keepdim=True) - xhat * (gr * xhat).mean(-1, keepdim=True))
    dims = (0,) + tuple(range(2, x.ndim))
    gw = (g * xhat.reshape(x.shape)).sum(dims) if c.needs(1) else None
    gb = g.sum(dims) if c.needs(2) else None
    if half:
        wt = c.self if c.weight is None else c.weight
        gx, gw, gb = (None if v is None else v.to(d) for v, d in
                      ((gx, c.self.dtype), (gw, wt.dtype), (gb, wt.dtype)))
    return (gx.reshape(x.shape) if c.needs(0) else None, gw, gb)


def _group_norm_primitives(node, emit):
    """layer_norm's primitives over (N, G, rest) (as _group_norm_vjp recomputes them), then
    the per-channel affine part."""
    x, w, b = (list(node.inputs) + [None, None])[:3]
    shape = x.type.shape
    groups = _groups(shape, node.attrs["num_groups"])
    if x.type.strides != contiguous_strides(shape):
        x = emit("clone", [x], memory_format="contiguous")
    xr = emit("view", [x], shape=groups)
    mu = emit("mean", [xr], dim=(2,), keepdim=True)
    xc = emit("sub", [xr, mu], alpha=1)
    var = emit("mean", [emit("mul", [xc, xc])], dim=(2,), keepdim=True)
    rstd = emit("rsqrt", [emit("add", [var, node.attrs["eps"]], alpha=1)])
    y = emit("view", [emit("mul", [xc, rstd])], shape=shape)
    cshape = (1, shape[1]) + (1,) * (len(shape) - 2)
    if w is not None:
        y = emit("mul", [y, emit("view", [w], shape=cshape)])
    if b is not None:
        y = emit("add", [y, emit("view", [b], shape=cshape)], alpha=1)
    return y


defop("group_norm", _group_norm, args=("self", "weight", "bias"), save=("self", "weight"),
      grad_fn="NativeGroupNormBackward0", vjp=_group_norm_vjp,
      decompose=_group_norm_primitives, eager_kernel="shaped", eager_min_elements=4096,
      eager_vjp="shaped")
