"""2-D convolution as three ops of the table: the forward (ConvolutionBackward0, as PyTorch's
aten::convolution) and the two products its backward is made of, the gradient with respect
to the input and to the weight (ConvolutionBackwardBackward0 when differentiated again).

All three are the same contraction seen from three sides. With the input's windows
unfolded into columns (im2col: one row per (channel, kernel row, kernel column), one column
per output position, zero where a window reaches into the padding),

    out[n, g]   = W[g] @ cols[n, g]                       (Og x M)   forward
    dcols[n, g] = W[g]^T @ grad[n, g], folded back (col2im)          input gradient
    dW[g]       = sum_n grad[n, g] @ cols[n, g]^T         (Og x K)   weight gradient

(K = C/groups * KH * KW, M = OH * OW). So each VJP is one of the other two ops, and the
three serve eager, tracing and every order of gradient. Padding is symmetric zeros
(stride, padding, dilation are pairs); F.conv2d pads other modes and uneven 'same' padding
itself first. Native code does the same im2col + one GEMM per image and group
(codegen/lowerings/ops_conv.py)."""
import numpy as np

from .optable import defop


def out_size(hw, kernel, stride, padding, dilation):
    """(OH, OW) of a convolution of an (H, W) plane."""
    return tuple((n + 2 * p - d * (k - 1) - 1) // s + 1
                 for n, k, s, p, d in zip(hw, kernel, stride, padding, dilation))


def columns(x, kernel, stride, padding, dilation):
    """x (N, C, H, W) unfolded channel-major: (C, KH, KW, N, OH, OW), zeros where windows
    reach the padding. (Images next to each other along the columns make each product below
    one large GEMM instead of one per image.)"""
    n, c, h, w = x.shape
    (ph, pw), (kh, kw) = padding, kernel
    oh, ow = out_size((h, w), kernel, stride, padding, dilation)
    if ph or pw:
        xp = np.zeros((n, c, h + 2 * ph, w + 2 * pw), dtype=x.dtype)
        xp[:, :, ph:ph + h, pw:pw + w] = x
    else:
        xp = np.ascontiguousarray(x)
    sn, sc, sh, sw = xp.strides
    win = np.lib.stride_tricks.as_strided(
        xp, (c, kh, kw, n, oh, ow),
        (sc, sh * dilation[0], sw * dilation[1], sn, sh * stride[0], sw * stride[1]))
    return np.ascontiguousarray(win)


def _check(name, x_shape, w_shape, g_shape, stride, padding, dilation, groups):
    """Raise ValueError unless input (N, C, H, W), weight (O, C/groups, KH, KW) and, where
    given, gradient (N, O, OH, OW) fit together (native code reads by these sizes)."""
    n, c = x_shape[:2]
    o, cg = w_shape[:2]
    ok = len(x_shape) == len(w_shape) == 4 and groups >= 1 and cg * groups == c \
        and o % groups == 0
    if ok and g_shape is not None:
        want = (n, o) + out_size(x_shape[2:], w_shape[2:], stride, padding, dilation)
        ok = tuple(g_shape) == want
    if not ok:
        raise ValueError(f"{name}: input {tuple(x_shape)}, weight {tuple(w_shape)}"
                         + (f" and gradient {tuple(g_shape)}" if g_shape is not None else "")
                         + f" do not fit (groups={groups}, stride={stride}, "
                           f"padding={padding}, dilation={dilation})")


def _by_group(g, groups):
    """grad (N, O, OH, OW) as (G, Og, N * OH * OW), the layout of the columns' products."""
    n, o, oh, ow = g.shape
    return np.ascontiguousarray(g.transpose(1, 0, 2, 3)).reshape(groups, o // groups,
                                                                 n * oh * ow)


def _convolution(x, w, b, stride, padding, dilation, groups):
    _check("convolution", x.shape, w.shape, None, stride, padding, dilation, groups)
    n, o = x.shape[0], w.shape[0]
    kernel = w.shape[2:]
    cols = columns(x, kernel, stride, padding, dilation)
    oh, ow = cols.shape[-2:]
    k = w.shape[1] * kernel[0] * kernel[1]
    # one product per image and group, each written straight into its NCHW place (the
    # columns of an image are a strided (K, M) view BLAS reads as it is)
    per_image = cols.reshape(groups, k, n, oh * ow).transpose(2, 0, 1, 3)
    out = np.matmul(w.reshape(groups, o // groups, k), per_image)   # (N, G, Og, M)
    out = out.reshape(n, o, oh, ow)
    if b is not None:
        out += b.reshape(o, 1, 1)       # (a fresh product: added in place)
    return np.ascontiguousarray(out, dtype=np.result_type(x, w))


def _backward_input(g, w, input_size, stride, padding, dilation, groups):
    _check("convolution_backward_input", g.shape[:1] + (w.shape[1] * groups,)
           + tuple(input_size), w.shape, g.shape, stride, padding, dilation, groups)
    n, o, oh, ow = g.shape
    _, cg, kh, kw = w.shape
    w2 = w.reshape(groups, o // groups, cg * kh * kw).transpose(0, 2, 1)
    dcols = np.matmul(w2, g.reshape(n, groups, o // groups, oh * ow))   # (N, G, K, M)
    dcols = dcols.reshape(n, cg * groups, kh, kw, oh, ow)
    (h, wd), (ph, pw), (sh, sw), (dh, dw) = input_size, padding, stride, dilation
    dxp = np.zeros((n, cg * groups, h + 2 * ph, wd + 2 * pw), dtype=dcols.dtype)
    for i in range(kh):             # col2im: each kernel offset adds one strided slice
        for j in range(kw):
            dxp[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh,
                j * dw:j * dw + sw * (ow - 1) + 1:sw] += dcols[:, :, i, j]
    return np.ascontiguousarray(dxp[:, :, ph:ph + h, pw:pw + wd], dtype=g.dtype)


def _backward_weight(g, x, weight_size, stride, padding, dilation, groups):
    _check("convolution_backward_weight", x.shape, weight_size, g.shape, stride, padding,
           dilation, groups)
    o, cg, kh, kw = weight_size
    cols = columns(x, (kh, kw), stride, padding, dilation)
    cols = cols.reshape(groups, cg * kh * kw, -1)
    dw = np.matmul(_by_group(g, groups), cols.transpose(0, 2, 1))   # (G, Og, K)
    return np.ascontiguousarray(dw.reshape(weight_size), dtype=g.dtype)


def _params(c):
    return {k: c.attrs[k] for k in ("stride", "padding", "dilation", "groups")}


def _convolution_vjp(c, g):
    p = _params(c)
    gx = gw = gb = None
    if c.needs(0):
        gx = g._op("convolution_backward_input", c.weight,
                   input_size=tuple(c.shape(0)[2:]), **p)
    if c.needs(1):
        gw = g._op("convolution_backward_weight", c.input, weight_size=tuple(c.shape(1)), **p)
    if c.needs(2):
        gb = g.sum((0, 2, 3))
    return gx, gw, gb


def _backward_input_vjp(c, u):
    # dx = Bi(g, W) is the adjoint of conv(., W): <u, Bi(g, W)> = <conv(u, W), g>
    p = _params(c)
    gg = u._op("convolution", c.weight, None, **p) if c.needs(0) else None
    gw = c.grad_output._op("convolution_backward_weight", u, weight_size=tuple(c.shape(1)),
                           **p) if c.needs(1) else None
    return gg, gw


def _backward_weight_vjp(c, v):
    # dW = Bw(g, x): <v, Bw(g, x)> = <g, conv(x, v)>
    p = _params(c)
    gg = c.input._op("convolution", v, None, **p) if c.needs(0) else None
    gx = c.grad_output._op("convolution_backward_input", v, input_size=tuple(c.shape(1)[2:]),
                           **p) if c.needs(1) else None
    return gg, gx


defop("convolution", _convolution, args=("input", "weight", "bias"), save=("input", "weight"),
      grad_fn="ConvolutionBackward0", vjp=_convolution_vjp)
defop("convolution_backward_input", _backward_input, args=("grad_output", "weight"),
      save=("grad_output", "weight"), grad_fn="ConvolutionBackwardBackward0",
      vjp=_backward_input_vjp)
defop("convolution_backward_weight", _backward_weight, args=("grad_output", "input"),
      save=("grad_output", "input"), grad_fn="ConvolutionBackwardBackward0",
      vjp=_backward_weight_vjp)
