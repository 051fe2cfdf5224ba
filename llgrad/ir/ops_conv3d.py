"""3-D convolution as one op of the table, `convolution3d` (ConvolutionBackward0, as PyTorch's
aten::convolution of a 5-D input), made of the 2-D convolution ops (ops_conv.py).

A 3-D convolution is a 2-D one over the depth windows. With the input zero-padded in depth
and each output depth od reading the kernel depths kd at depth od * sd + kd * dd,

    x2[n * OD + od, c * KD + kd] = xpad[n, c, od * sd + kd * dd]        (N*OD, C*KD, H, W)
    w2 = weight.reshape(O, C/groups * KD, KH, KW)
    out[n, :, od] = convolution(x2, w2, bias)[n * OD + od]              (2-D, same groups)

(the channels of x2 are group-major, as w2's, so groups carry over). The VJP is the 2-D
backward ops on the same arrangement: the weight's gradient is convolution_backward_weight
of x2, the input's is convolution_backward_input folded back over the depth windows (an
index_add along depth); so eager, tracing and every order of gradient reuse the 2-D
kernels. Native code runs the forward as its decomposition into index_select, the 2-D
`convolution` and views (ir/decompose.py)."""
import numpy as np

from .geometry import contiguous_strides
from .ops_conv import _convolution
from .optable import defop


def _numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def depth_out(d, k, s, p, dil):
    """The output depth of a convolution (no ceil mode)."""
    return (d + 2 * p - dil * (k - 1) - 1) // s + 1


def depth_index(od, kd, sd, dd):
    """Row-major (od, kd) -> od * sd + kd * dd: the padded depth each window row reads."""
    return (np.arange(od)[:, None] * sd + np.arange(kd)[None, :] * dd).reshape(-1)


def _check(x_shape, w_shape, stride, padding, dilation, groups):
    ok = len(x_shape) == len(w_shape) == 5 and groups >= 1 and w_shape[1] * groups == \
        x_shape[1] and w_shape[0] % groups == 0
    if ok:
        ok = min(depth_out(n, k, s, p, d) for n, k, s, p, d in
                 zip(x_shape[2:], w_shape[2:], stride, padding, dilation)) >= 1
    if not ok:
        raise ValueError(f"convolution3d: input {tuple(x_shape)} and weight {tuple(w_shape)} do "
                         f"not fit (groups={groups}, stride={stride}, padding={padding}, "
                         f"dilation={dilation})")


def _two_d(attrs):
    """The 2-D convolution's attributes: the last two of each triple."""
    return {"stride": tuple(attrs["stride"][1:]), "padding": tuple(attrs["padding"][1:]),
            "dilation": tuple(attrs["dilation"][1:]), "groups": attrs["groups"]}


# ---- NumPy ----------------------------------------------------------------------------------

def _windows_np(x, kd, sd, pd, dd):
    """x (N, C, D, H, W) as x2 (N*OD, C*KD, H, W), contiguous, and OD."""
    n, c, d, h, w = x.shape
    od = depth_out(d, kd, sd, pd, dd)
    if pd:
        xp = np.zeros((n, c, d + 2 * pd, h, w), x.dtype)
        xp[:, :, pd:pd + d] = x
    else:
        xp = x
    s = xp.strides
    win = np.lib.stride_tricks.as_strided(xp, (n, od, c, kd, h, w),
                                          (s[0], s[2] * sd, s[1], s[2] * dd, s[3], s[4]),
                                          writeable=False)
    return np.ascontiguousarray(win).reshape(n * od, c * kd, h, w), od


def _convolution3d(x, w, b, stride, padding, dilation, groups):
    _check(x.shape, w.shape, stride, padding, dilation, groups)
    n, o, kd = x.shape[0], w.shape[0], w.shape[2]
    x2, od = _windows_np(x, kd, stride[0], padding[0], dilation[0])
    w2 = np.reshape(w, (o, w.shape[1] * kd) + tuple(w.shape[3:]))
    p2 = _two_d({"stride": stride, "padding": padding, "dilation": dilation, "groups": groups})
    y2 = _convolution(x2, w2, b, **p2)
    oh, ow = y2.shape[2:]
    return np.ascontiguousarray(y2.reshape(n, od, o, oh, ow).transpose(0, 2, 1, 3, 4))


# ---- the VJP (Tensor API) -------------------------------------------------------------------

def windows(x, kd, sd, pd, dd, od):
    """The Tensor x (N, C, D, H, W) as x2 (N*OD, C*KD, H, W) (differentiable)."""
    n, c, _, h, w = x.shape
    if pd:
        x = x._op("constant_pad_nd", pad=(0, 0, 0, 0, pd, pd), value=0)
    idx = x.new_tensor(depth_index(od, kd, sd, dd), dtype="int64")
    x6 = x.index_select(2, idx).reshape(n, c, od, kd, h, w)
    return x6.permute(0, 2, 1, 3, 4, 5).reshape(n * od, c * kd, h, w)


def _convolution3d_vjp(c, g):
    (sd, _, _), (pd, _, _), (dd, _, _) = c.stride, c.padding, c.dilation
    n, ch, d, h, w = c.shape(0)
    o, cg, kd, kh, kw = c.shape(1)
    od, oh, ow = g.shape[2:]
    p2 = _two_d(c.attrs)
    g2 = g.permute(0, 2, 1, 3, 4).reshape(n * od, o, oh, ow)
    gx = gw = gb = None
    if c.needs(0):
        w2 = c.weight.reshape(o, cg * kd, kh, kw)
        dx2 = g2._op("convolution_backward_input", w2, input_size=(h, w), **p2)
        dx = dx2.reshape(n, od, ch, kd, h, w).permute(0, 2, 1, 3, 4, 5) \
            .reshape(n, ch, od * kd, h, w)
        idx = dx.new_tensor(depth_index(od, kd, sd, dd), dtype="int64")
        gx = dx.new_zeros((n, ch, d + 2 * pd, h, w)).index_add(2, idx, dx)
        gx = gx.narrow(2, pd, d) if pd else gx
    if c.needs(1):
        x2 = windows(c.input, kd, sd, pd, dd, od)
        gw = g2._op("convolution_backward_weight", x2, weight_size=(o, cg * kd, kh, kw),
                    **p2).reshape(o, cg, kd, kh, kw)
    if c.needs(2):
        gb = g.sum((0, 2, 3, 4))
    return gx, gw, gb


# ---- native code: the forward as primitive ops ----------------------------------------------

def constant(emit, arr):
    """A literal array as an IR value."""
    arr = np.asarray(arr)
    return emit("constant", [], value=arr.tolist(), dtype=arr.dtype.name)


def pad_primitives(emit, x, pads, value):
    """x padded with value: pads is ((dim, before, after), ...), each >= 0 (a filled
    buffer with x put into it, as constant_pad_nd's decomposition)."""
    shape = list(x.type.shape)
    for dim, lo, hi in pads:
        shape[dim] += lo + hi
    strides = contiguous_strides(tuple(shape))
    offset = sum(lo * strides[dim] for dim, lo, _ in pads)
    buf = emit("full", [], shape=(_numel(shape),), value=value, dtype=x.type.dtype)
    put = emit("strided_put", [buf, x], geom=(tuple(x.type.shape), strides, offset))
    return emit("view", [put], shape=tuple(shape))


def contiguous(emit, x):
    if x.type.strides != contiguous_strides(x.type.shape):
        x = emit("clone", [x], memory_format="contiguous")
    return x


def _convolution3d_primitives(node, emit):
    x, w, b = node.inputs
    a = node.attrs
    (sd, _, _), (pd, _, _), (dd, _, _) = a["stride"], a["padding"], a["dilation"]
    n, ch, d, h, wd = x.type.shape
    o, cg, kd, kh, kw = w.type.shape
    _, _, od, oh, ow = node.outputs[0].type.shape
    if pd:
        x = pad_primitives(emit, x, ((2, pd, pd),), 0)
    xs = emit("index_select", [x, constant(emit, depth_index(od, kd, sd, dd))], dim=2)
    x6 = emit("view", [contiguous(emit, xs)], shape=(n, ch, od, kd, h, wd))
    x2 = emit("view", [contiguous(emit, emit("permute", [x6], dims=(0, 2, 1, 3, 4, 5)))],
              shape=(n * od, ch * kd, h, wd))
    w2 = emit("view", [contiguous(emit, w)], shape=(o, cg * kd, kh, kw))
    y2 = emit("convolution", [x2, w2, b], **_two_d(a))
    y = emit("view", [y2], shape=(n, od, o, oh, ow))
    return emit("permute", [y], dims=(0, 2, 1, 3, 4))


defop("convolution3d", _convolution3d, args=("input", "weight", "bias"),
      save=("input", "weight"), grad_fn="ConvolutionBackward0", vjp=_convolution3d_vjp,
      decompose=_convolution3d_primitives, autocast="lower")
