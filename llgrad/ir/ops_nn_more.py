"""Padding, average pooling and group normalisation as PyTorch runs them: one op each, with
PyTorch's backward node (ConstantPadNdBackward0, ReflectionPad{1,2,3}DBackward0,
ReplicationPad{1,2,3}DBackward0, AvgPool2DBackward0, NativeGroupNormBackward0).

Native code runs each as its decomposition into primitive ops: a constant pad is a filled
buffer with the input put into it (strided_put), a reflect/replicate pad one index_select
per padded dim, avg_pool2d the sum over an as_strided window view of the padded input
divided by the window counts, group_norm layer_norm's primitives over (N, G, C/G * ...).
`pad` attributes are in PyTorch's order: (left, right) of the last dim first."""
import numpy as np

from .geometry import contiguous_strides
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
      decompose=_constant_pad_primitives)


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
    out = (size + 2 * pad - (k - 1) - 1 + (stride - 1 if ceil_mode else 0)) // stride + 1
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1
    return out


def avg_geometry(h, w, kernel_size, stride, padding, ceil_mode, count_include_pad,
                 divisor_override):
    """(oh, ow, bottom, right, divisor): the output size, the zeros the windows need below
    and right of the input (beyond the padding), and PyTorch's divisor of each window."""
    out, ends, divs = [], [], []
    for n, k, s, p in zip((h, w), kernel_size, stride, padding):
        o = pool_out(n, k, p, s, ceil_mode)
        start = np.arange(o) * s - p
        end = np.minimum(start + k, n + p)
        size = end - start
        valid = np.minimum(end, n) - np.maximum(start, 0)
        out.append(o)
        ends.append(max((o - 1) * s + k - p - n, 0))
        divs.append(size if count_include_pad else valid)
    if divisor_override:
        div = np.full((out[0], out[1]), float(divisor_override))
    else:
        div = np.outer(divs[0], divs[1]).astype(np.float64)
    return out[0], out[1], ends[0], ends[1], div


def _avg_parts(shape, a):
    """(padded shape, window geometry over the padded contiguous buffer, divisor)."""
    lead, (h, w) = tuple(shape[:-2]), shape[-2:]
    (ph, pw), (sh, sw), (kh, kw) = a["padding"], a["stride"], a["kernel_size"]
    oh, ow, bottom, right, div = avg_geometry(h, w, a["kernel_size"], a["stride"], a["padding"],
                                              a["ceil_mode"], a["count_include_pad"],
                                              a["divisor_override"])
    padded = lead + (h + ph + bottom, w + pw + right)
    st = contiguous_strides(padded)
    geom = (lead + (oh, ow, kh, kw), st[:-2] + (sh * st[-2], sw, st[-2], 1), 0)
    return padded, geom, div


def _avg_pool2d(x, kernel_size, stride, padding, ceil_mode, count_include_pad,
                divisor_override):
    a = dict(kernel_size=kernel_size, stride=stride, padding=padding, ceil_mode=ceil_mode,
             count_include_pad=count_include_pad, divisor_override=divisor_override)
    padded, (wshape, wstrides, _), div = _avg_parts(x.shape, a)
    (ph, pw), (h, w) = padding, x.shape[-2:]
    xp = np.zeros(padded, dtype=x.dtype)
    xp[..., ph:ph + h, pw:pw + w] = x
    win = np.lib.stride_tricks.as_strided(xp, wshape, [s * xp.itemsize for s in wstrides])
    return (win.sum(axis=(-2, -1)) / div).astype(x.dtype, copy=False)


def _avg_pool2d_vjp(c, g):
    shape = c.shape(0)
    padded, geom, div = _avg_parts(shape, c.attrs)
    gw = (g / g.new_tensor(div)).unsqueeze(-1).unsqueeze(-1).expand(geom[0])
    gp = gw._op("strided_scatter", geom=geom, span=_numel(padded)).reshape(padded)
    (ph, pw), (h, w) = c.padding, shape[-2:]
    return (gp[..., ph:ph + h, pw:pw + w],)


def _avg_pool2d_primitives(node, emit):
    x, a = node.inputs[0], node.attrs
    shape = x.type.shape
    padded, geom, div = _avg_parts(shape, a)
    (ph, pw), (h, w) = a["padding"], shape[-2:]
    if padded != shape:
        st = contiguous_strides(padded)
        buf = emit("full", [], shape=(_numel(padded),), value=0, dtype=x.type.dtype)
        put = emit("strided_put", [buf, x], geom=(shape, st, ph * st[-2] + pw))
        x = emit("view", [put], shape=padded)
        size, stride, off = geom
    else:       # the windows over the input's own layout
        xs, off = x.type.strides, x.type.offset
        (sh, sw), (kh, kw) = a["stride"], a["kernel_size"]
        size, stride = geom[0], xs[:-2] + (sh * xs[-2], sw * xs[-1], xs[-2], xs[-1])
    win = emit("as_strided", [x], size=size, stride=stride, storage_offset=off,
               in_strides=x.type.strides, in_offset=x.type.offset)
    nd = len(size)
    s = emit("sum", [win], dim=(nd - 2, nd - 1), keepdim=False)
    return emit("div", [s, _constant(emit, div.astype(x.type.dtype))])


defop("avg_pool2d", _avg_pool2d, grad_fn="AvgPool2DBackward0", vjp=_avg_pool2d_vjp,
      decompose=_avg_pool2d_primitives)


# ---- group_norm ----------------------------------------------------------------------------

def _groups(shape, num_groups):
    """(N, G, C/G * spatial): the shape group_norm normalises the last dim of."""
    return (shape[0], num_groups, shape[1] // num_groups * _numel(shape[2:]))


def _group_norm(x, w, b, num_groups, eps):
    n, c = x.shape[:2]
    xr = x.reshape(_groups(x.shape, num_groups))
    mu = xr.mean(axis=-1, keepdims=True)
    xc = xr - mu
    var = (xc * xc).mean(axis=-1, keepdims=True)
    y = (xc / np.sqrt(var + eps)).reshape(x.shape)
    cshape = (1, c) + (1,) * (x.ndim - 2)
    if w is not None:
        y = y * w.reshape(cshape)
    if b is not None:
        y = y + b.reshape(cshape)
    return y.astype(x.dtype, copy=False)


def _group_norm_vjp(c, g):
    x, w = c.self, c.weight
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
      decompose=_group_norm_primitives)
