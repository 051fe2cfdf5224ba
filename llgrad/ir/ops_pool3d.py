"""3-D pooling as PyTorch runs it, over the last three dims of (..., D, H, W):
max_pool3d_with_indices (MaxPool3DWithIndicesBackward0) and avg_pool3d (AvgPool3DBackward0),
each made of its 2-D op (ops_pool.py, ops_nn_more.py) applied to depth slices.

max_pool3d: the input padded in depth with the dtype's lowest value (never a window's
maximum: the padding is never read, as in PyTorch), then for each kernel depth kd in order,
the 2-D pool of the depth slices od * sd - pd + kd * dd gives each window row's maximum and
its plane index; a row replaces the best so far where it is greater or NaN, PyTorch's rule
(`val > maxval || isnan(val)`), so the first maximum in (kd, kh, kw) order wins, or the last
NaN. The index is the flat position d * H * W + h * W + w in the input volume; a window
whose every element is the lowest keeps PyTorch's start index (the window's first position
moved inside the input by dilations). Its VJP scatters the gradient to the indices
(scatter_add, in output order).

avg_pool3d: the 2-D window sums (avg_pool2d with divisor 1) of every plane of the
zero-padded input, added over each window's kernel depths, divided by PyTorch's divisor
(per dim: the window clipped to the padded input, or to the input without
count_include_pad; or divisor_override). Its VJP spreads gradient / divisor back through
avg_pool2d_backward and an index_add over depth. Native code runs both forwards as their
decompositions into the 2-D ops (ir/decompose.py)."""
import numpy as np

from .ops_conv3d import constant, pad_primitives
from .ops_nn_more import _avg_pool2d, _divided, pool_out, window_count
from .ops_pool import _lowest, _max_pool2d, first_inside, out_size, valid_outputs
from .optable import defop


def _triples(kernel_size, stride, padding, dilation=(1, 1, 1)):
    return tuple(zip(kernel_size, stride, padding, dilation))


def _depth_geometry(d, kd, sd, pd, dd, od):
    """(pad after, padded depth): the zeros past the input the last window reads."""
    hi = max(0, (od - 1) * sd + (kd - 1) * dd + 1 - d - pd)
    return hi, pd + d + hi


def _pad_depth(x, lo, hi, value):
    if not (lo or hi):
        return x
    shape = x.shape[:-3] + (x.shape[-3] + lo + hi,) + x.shape[-2:]
    out = np.full(shape, value, dtype=x.dtype)
    out[..., lo:lo + x.shape[-3], :, :] = x
    return out


def _depth_slice(a, dd, sd, od):
    return slice(a * dd, a * dd + (od - 1) * sd + 1, sd)


# ---- max_pool3d_with_indices ----------------------------------------------------------------

def _geometry(shape, kernel_size, stride, padding, dilation, ceil_mode):
    """(od, oh, ow), the start index of every window (od, oh, ow), and whether every window
    reads some element of the input."""
    outs = tuple(out_size(n, k, p, s, dl, ceil_mode) for n, (k, s, p, dl) in
                 zip(shape, _triples(kernel_size, stride, padding, dilation)))
    firsts = [first_inside(o, s, p, dl) for o, (k, s, p, dl) in
              zip(outs, _triples(kernel_size, stride, padding, dilation))]
    h, w = shape[1:]
    start = (firsts[0][:, None, None] * h + firsts[1][None, :, None]) * w + firsts[2]
    complete = True
    for n, o, (k, s, p, dl) in zip(shape, outs, _triples(kernel_size, stride, padding,
                                                          dilation)):
        seen = np.zeros(o, bool)
        for j in range(k):
            lo, hi = valid_outputs(o, n, s, p, j * dl)
            seen[lo:hi] = True
        complete = complete and bool(seen.all())
    return outs, start, complete


def _max_pool3d(x, kernel_size, stride, padding, dilation, ceil_mode):
    d, h, w = x.shape[-3:]
    (od, oh, ow), start, _ = _geometry((d, h, w), kernel_size, stride, padding, dilation,
                                       ceil_mode)
    (kd, sd, pd, dd) = _triples(kernel_size, stride, padding, dilation)[0]
    hi, _ = _depth_geometry(d, kd, sd, pd, dd, od)
    low = _lowest(x.dtype)
    xp = _pad_depth(x, pd, hi, low)
    k2 = {"kernel_size": tuple(kernel_size[1:]), "stride": tuple(stride[1:]),
          "padding": tuple(padding[1:]), "dilation": tuple(dilation[1:]),
          "ceil_mode": ceil_mode}
    best = np.full(x.shape[:-3] + (od, oh, ow), low, dtype=x.dtype)
    idx = np.broadcast_to(start, best.shape).astype(np.int64)
    for a in range(kd):
        v, i = _max_pool2d(xp[..., _depth_slice(a, dd, sd, od), :, :], **k2)
        plane = (np.arange(od, dtype=np.int64) * sd - pd + a * dd) * (h * w)
        better = v > best
        if x.dtype.kind == "f":
            better |= np.isnan(v)
        best = np.where(better, v, best)
        idx = np.where(better, i + plane[:, None, None], idx)
    return best, idx


def _max_pool3d_vjp(c, gs):
    shape = tuple(c.shape(0))
    lead, vol = shape[:-3], shape[-3] * shape[-2] * shape[-1]
    g = gs[0].reshape(lead + (-1,))
    idx = c.result1.reshape(lead + (-1,))
    _, _, complete = _geometry(shape[-3:], c.kernel_size, c.stride, c.padding, c.dilation,
                               c.ceil_mode)
    if not complete:        # (a window that read nothing: its index may lie past the volume)
        inside = (idx >= 0).logical_and(idx < vol)
        g, idx = g.masked_fill(inside.logical_not(), 0), idx.clamp(0, vol - 1)
    out = g.new_zeros(lead + (vol,)).scatter_add(len(lead), idx, g)
    return (out.reshape(shape),)


def _max_pool3d_primitives(node, emit):
    """_max_pool3d's steps as ops: the 2-D op per kernel depth, compared and selected."""
    x = node.inputs[0]
    a = node.attrs
    d, h, w = x.type.shape[-3:]
    nd = len(x.type.shape)
    (od, oh, ow), start, _ = _geometry((d, h, w), a["kernel_size"], a["stride"],
                                       a["padding"], a["dilation"], a["ceil_mode"])
    (kd, sd, pd, dd) = _triples(a["kernel_size"], a["stride"], a["padding"], a["dilation"])[0]
    hi, _ = _depth_geometry(d, kd, sd, pd, dd, od)
    low = float(_lowest(np.dtype(x.type.dtype)))
    xp = pad_primitives(emit, x, ((nd - 3, pd, hi),), low) if pd or hi else x
    k2 = {k: tuple(a[k][1:]) for k in ("kernel_size", "stride", "padding", "dilation")}
    best = emit("full", [], shape=tuple(x.type.shape[:-3]) + (od, oh, ow), value=low,
                dtype=x.type.dtype)
    idx = constant(emit, start.astype(np.int64))
    for k in range(kd):
        sl = _depth_slice(k, dd, sd, od)
        xs = emit("slice", [xp], dim=nd - 3, start=sl.start, end=sl.stop, step=sl.step)
        v = emit("max_pool2d_with_indices", [xs], ceil_mode=a["ceil_mode"], **k2)
        i = v.node.outputs[1]
        plane = (np.arange(od, dtype=np.int64) * sd - pd + k * dd) * (h * w)
        i3 = emit("add", [i, constant(emit, plane[:, None, None])], alpha=1)
        better = emit("logical_or", [emit("gt", [v, best]), emit("isnan", [v])])
        best = emit("where", [better, v, best])
        idx = emit("where", [better, i3, idx])
    return best, idx


defop("max_pool3d_with_indices", _max_pool3d, nout=2, save=("self", "result1"),
      grad_fn="MaxPool3DWithIndicesBackward0", vjp=_max_pool3d_vjp,
      decompose=_max_pool3d_primitives)


# ---- avg_pool3d -----------------------------------------------------------------------------

def _divisor(shape, kernel_size, stride, padding, ceil_mode, count_include_pad,
             divisor_override):
    """(od, oh, ow) and PyTorch's divisor of each window (float64, (od, oh, ow))."""
    outs, counts = [], []
    for n, (k, s, p, _) in zip(shape, _triples(kernel_size, stride, padding)):
        o = pool_out(n, k, p, s, ceil_mode)
        outs.append(o)
        counts.append(window_count(np.arange(o), n, k, s, p, count_include_pad))
    if divisor_override:
        return tuple(outs), np.full(tuple(outs), float(divisor_override))
    div = counts[0][:, None, None] * counts[1][None, :, None] * counts[2]
    return tuple(outs), div.astype(np.float64)


def _two_d_sums(kernel_size, stride, padding, ceil_mode):
    return {"kernel_size": tuple(kernel_size[1:]), "stride": tuple(stride[1:]),
            "padding": tuple(padding[1:]), "ceil_mode": ceil_mode, "count_include_pad": True,
            "divisor_override": 1}


def _avg_pool3d(x, kernel_size, stride, padding, ceil_mode, count_include_pad,
                divisor_override):
    d = x.shape[-3]
    (od, oh, ow), div = _divisor(x.shape[-3:], kernel_size, stride, padding, ceil_mode,
                                 count_include_pad, divisor_override)
    kd, sd, pd = kernel_size[0], stride[0], padding[0]
    hi, _ = _depth_geometry(d, kd, sd, pd, 1, od)
    sums = _avg_pool2d(_pad_depth(x, pd, hi, 0), **_two_d_sums(kernel_size, stride, padding,
                                                                 ceil_mode))
    acc = sums[..., _depth_slice(0, 1, sd, od), :, :]
    for a in range(1, kd):
        acc = acc + sums[..., _depth_slice(a, 1, sd, od), :, :]
    return _divided(acc, div).astype(x.dtype, copy=False)


def _avg_pool3d_vjp(c, g):
    shape = tuple(c.shape(0))
    lead, (d, h, w) = shape[:-3], shape[-3:]
    ks, ss, ps = c.kernel_size, c.stride, c.padding
    (od, _, _), div = _divisor(shape[-3:], ks, ss, ps, c.ceil_mode, c.count_include_pad,
                               c.divisor_override)
    kd, sd, pd = ks[0], ss[0], ps[0]
    hi, dp = _depth_geometry(d, kd, sd, pd, 1, od)
    share = g / g.new_tensor(div)
    planes = g.new_zeros(()).expand(lead + (od, h, w))       # (read for its shape only)
    t = share._op("avg_pool2d_backward", planes, **_two_d_sums(ks, ss, ps, c.ceil_mode))
    nd = len(shape)
    src = t.unsqueeze(nd - 2).expand(lead + (od, kd, h, w)).reshape(lead + (od * kd, h, w))
    idx = g.new_tensor((np.arange(od)[:, None] * sd + np.arange(kd)).reshape(-1),
                       dtype="int64")
    gx = g.new_zeros(lead + (dp, h, w)).index_add(nd - 3, idx, src)
    return (gx.narrow(nd - 3, pd, d) if pd or hi else gx,)


def _avg_pool3d_primitives(node, emit):
    x = node.inputs[0]
    a = node.attrs
    d = x.type.shape[-3]
    nd = len(x.type.shape)
    (od, _, _), div = _divisor(x.type.shape[-3:], a["kernel_size"], a["stride"],
                               a["padding"], a["ceil_mode"], a["count_include_pad"],
                               a["divisor_override"])
    kd, sd, pd = a["kernel_size"][0], a["stride"][0], a["padding"][0]
    hi, _ = _depth_geometry(d, kd, sd, pd, 1, od)
    xp = pad_primitives(emit, x, ((nd - 3, pd, hi),), 0) if pd or hi else x
    sums = emit("avg_pool2d", [xp], **_two_d_sums(a["kernel_size"], a["stride"], a["padding"],
                                                  a["ceil_mode"]))
    acc = None
    for k in range(kd):
        sl = _depth_slice(k, 1, sd, od)
        part = emit("slice", [sums], dim=nd - 3, start=sl.start, end=sl.stop, step=sl.step)
        acc = part if acc is None else emit("add", [acc, part], alpha=1)
    return emit("div", [acc, constant(emit, div.astype(x.type.dtype))])


defop("avg_pool3d", _avg_pool3d, save=("self",), grad_fn="AvgPool3DBackward0",
      vjp=_avg_pool3d_vjp, decompose=_avg_pool3d_primitives)
