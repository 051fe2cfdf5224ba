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
(codegen/lowerings/ops_conv.py); the NumPy implementations below work on a few images at a
time, and fold stride-1 input gradients on the padded grid (see _backward_input)."""
import numpy as np

from .optable import defop
from .np_matmul import matmul

# Output maps smaller than this (positions an image) are products over all the images at
# once, not one thin product per image: a BLAS runs a 4x4 map's products several times
# slower one image at a time (NumPy's stacked matmul) than as one (the native lowering,
# codegen/lowerings/ops_conv.py, reads this too).
BATCH_BELOW = 48


def batches(groups, out_channels, positions):
    """Whether a convolution's products run over all its images at once: no groups, a
    small map, and enough output channels that the product is not a matrix-vector one."""
    return groups == 1 and positions < BATCH_BELOW and out_channels >= 16


def out_size(hw, kernel, stride, padding, dilation):
    """(OH, OW) of a convolution of an (H, W) plane."""
    return tuple((n + 2 * p - d * (k - 1) - 1) // s + 1
                 for n, k, s, p, d in zip(hw, kernel, stride, padding, dilation))


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


# ---- the NumPy implementations: a few images at a time -------------------------------------
# A batch's columns are 9x its input (18 MB for 32 images of 16x32x32): unfolded a chunk of
# images at a time into a buffer that stays in the core's cache, each product reads them while
# they are hot and writes its images' NCHW slices in place (no transposes of the results),
# where a whole-batch unfold walked every 18 MB array through memory two or three times.

CHUNK = 1 << 17         # elements of a chunk's columns or dcols (512 KB of float32)


def _chunk(n, per_image):
    """Images per chunk: a chunk's columns fill about CHUNK elements (one image at least)."""
    return max(1, min(n, CHUNK // max(1, per_image)))


class _Planes:
    """Zero-padded copies of a few images' planes at a time (m, C, H', W'): the padding is
    written once (the buffer's borders stay zero), each chunk copies in its interior."""

    def __init__(self, x, padding, imgs, dtype):
        (ph, pw), (h, w) = padding, x.shape[2:]
        self.x, self.inner = x, (slice(ph, ph + h), slice(pw, pw + w))
        self.buf = np.zeros((imgs, x.shape[1], h + 2 * ph, w + 2 * pw), dtype)

    def __getitem__(self, i0):
        m = min(len(self.buf), len(self.x) - i0)
        self.buf[(slice(0, m), slice(None)) + self.inner] = self.x[i0:i0 + m]
        return self.buf[:m]


def _windows(xp, groups, kernel, out, stride, dilation):
    """Padded images (m, C, H', W') as their windows (m, G, C/G, KH, KW, OH, OW): a view."""
    sn, sc, sh, sw = xp.strides
    cg = xp.shape[1] // groups
    return np.lib.stride_tricks.as_strided(
        xp, (xp.shape[0], groups, cg) + tuple(kernel) + tuple(out),
        (sn, sc * cg, sc, sh * dilation[0], sw * dilation[1], sh * stride[0], sw * stride[1]),
        writeable=False)


def _convolution(x, w, b, stride, padding, dilation, groups):
    _check("convolution", x.shape, w.shape, None, stride, padding, dilation, groups)
    n, o = x.shape[0], w.shape[0]
    cg, kh, kw = w.shape[1:]
    oh, ow = out_size(x.shape[2:], (kh, kw), stride, padding, dilation)
    dt = np.result_type(x, w)
    k, og = cg * kh * kw, o // groups
    imgs = _chunk(n, (k + 1) * groups * oh * ow)
    # the bias as one more row of the columns, all ones: the product adds it (free)
    w2 = w.reshape(groups, og, k).astype(dt, copy=False)
    cols = np.empty((imgs, groups, k + (b is not None), oh * ow), dt)
    if b is not None:
        w2 = np.concatenate([w2, np.reshape(b, (groups, og, 1)).astype(dt)], axis=2)
        cols[:, :, k] = 1
    win = cols[:, :, :k].reshape(imgs, groups, cg, kh, kw, oh, ow)
    out = np.empty((n, o, oh, ow), dt)
    planes = _Planes(x, padding, imgs, dt)
    if batches(groups, o, oh * ow):        # (the chunk's columns side by side)
        colsb = np.empty((k + (b is not None), imgs * oh * ow), dt)
        colsb[k:] = 1
        winb = colsb[:k].reshape(cg, kh, kw, imgs, oh, ow)
        for i0 in range(0, n, imgs):
            xp = planes[i0]
            m = len(xp)
            win = _windows(xp, 1, (kh, kw), (oh, ow), stride, dilation)[:, 0]
            np.copyto(winb[:, :, :, :m], win.transpose(1, 2, 3, 0, 4, 5))
            r = matmul(w2[0], colsb[:, :m * oh * ow])
            out[i0:i0 + m] = r.reshape(o, m, oh, ow).transpose(1, 0, 2, 3)
        return out
    for i0 in range(0, n, imgs):
        xp = planes[i0]
        m = len(xp)
        np.copyto(win[:m], _windows(xp, groups, (kh, kw), (oh, ow), stride, dilation))
        matmul(w2, cols[:m], out=out[i0:i0 + m].reshape(m, groups, og, oh * ow))
    return out


def _backward_input(g, w, input_size, stride, padding, dilation, groups):
    _check("convolution_backward_input", g.shape[:1] + (w.shape[1] * groups,)
           + tuple(input_size), w.shape, g.shape, stride, padding, dilation, groups)
    # (the padded grid's zeros meet every weight: an inf or NaN there would reach positions
    # the direct fold never gives it)
    if tuple(stride) != (1, 1) or groups != 1 or not np.isfinite(w).all():
        return _backward_input_strided(g, w, input_size, stride, padding, dilation, groups)
    n, o, oh, ow = g.shape
    _, c, kh, kw = w.shape
    (h, wd), (ph, pw), (dh, dw) = input_size, padding, dilation
    hp, wp = h + 2 * ph, wd + 2 * pw
    plane, taps = hp * wp, kh * kw
    dt = np.result_type(g, w)
    # col2im as a few long contiguous adds: the gradient is laid out on the padded input's
    # grid (rows of W + 2 * pw, zeros past OW and below OH), so kernel offset (a, b) adds
    # dcols' rows for (a, b) into the padded planes at one flat offset. Each buffer is flat
    # with one stride per channel (planes of a few images, then `slack` zeros), so one add
    # covers every channel; the zeros add nothing, and an image's contributions stay inside
    # its own plane. (NumPy adds into a strided 2-D view at a fifth of a flat add's speed.)
    imgs = _chunk(n, c * taps * plane)
    slack = (kh - 1) * dh * wp + (kw - 1) * dw
    stride_c = imgs * plane + slack
    gg = np.zeros((o, stride_c), dt)
    grid = gg[:, :imgs * plane].reshape(o, imgs, hp, wp)
    # rows (a, b, channel): kernel offset (a, b)'s rows are one block of c * stride_c
    w2 = np.ascontiguousarray(w.transpose(2, 3, 1, 0), dtype=dt).reshape(taps * c, o)
    dcols = np.zeros((taps * c, stride_c), dt)
    flat = dcols.reshape(taps, c * stride_c)
    dxp = np.empty(c * stride_c + slack, dt)
    dx = np.empty((n, c, h, wd), g.dtype)
    for i0 in range(0, n, imgs):
        m = min(imgs, n - i0)
        span = m * plane
        grid[:, :m, :oh, :ow] = g[i0:i0 + m].transpose(1, 0, 2, 3)
        matmul(w2, gg[:, :span], out=dcols[:, :span])
        if span < imgs * plane:         # (a last, shorter chunk: its tail must add zeros)
            dcols[:, span:] = 0
        dxp.fill(0)
        for a in range(kh):
            for b in range(kw):
                off = a * dh * wp + b * dw
                dxp[off:off + c * stride_c] += flat[a * kw + b]
        planes = dxp[:c * stride_c].reshape(c, stride_c)[:, :span].reshape(c, m, hp, wp)
        dx[i0:i0 + m] = planes[:, :, ph:ph + h, pw:pw + wd].transpose(1, 0, 2, 3)
    return dx


def _backward_input_strided(g, w, input_size, stride, padding, dilation, groups):
    """Any stride: the whole batch's dcols, folded back by one strided add per kernel offset."""
    n, o, oh, ow = g.shape
    _, cg, kh, kw = w.shape
    w2 = w.reshape(groups, o // groups, cg * kh * kw).transpose(0, 2, 1)
    if batches(groups, o, oh * ow):        # (K, N*M): one product
        gb = g.reshape(n, o, oh * ow).transpose(1, 0, 2).reshape(o, n * oh * ow)
        dcols = matmul(w2[0], gb).reshape(cg, kh, kw, n, oh, ow).transpose(3, 0, 1, 2, 4, 5)
    else:
        dcols = matmul(w2, g.reshape(n, groups, o // groups, oh * ow))   # (N, G, K, M)
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
    n, oh, ow = g.shape[0], g.shape[2], g.shape[3]
    k, og = cg * kh * kw, o // groups
    dt = np.result_type(g, x)
    imgs = _chunk(n, k * groups * oh * ow)
    cols = np.empty((imgs, groups, k, oh * ow), dt)
    win = cols.reshape(imgs, groups, cg, kh, kw, oh, ow)
    g4 = g.reshape(n, groups, og, oh * ow).astype(dt, copy=False)
    # dW^T (K, Og) per group and image: columns times the image's gradient transposed, the
    # orientation OpenBLAS runs fastest for these shapes; summed over the images
    acc, part = np.zeros((groups, k, og), dt), np.empty((imgs, groups, k, og), dt)
    planes = _Planes(x, padding, imgs, dt)
    if batches(groups, o, oh * ow):        # (the chunk's columns side by side)
        mm = oh * ow
        colsb = np.empty((k, imgs * mm), dt)
        winb = colsb.reshape(cg, kh, kw, imgs, oh, ow)
        for i0 in range(0, n, imgs):
            xp = planes[i0]
            m = len(xp)
            win = _windows(xp, 1, (kh, kw), (oh, ow), stride, dilation)[:, 0]
            np.copyto(winb[:, :, :, :m], win.transpose(1, 2, 3, 0, 4, 5))
            gb = g4[i0:i0 + m, 0].transpose(1, 0, 2).reshape(og, m * mm)
            acc[0] += matmul(colsb[:, :m * mm], gb.T)
        return np.ascontiguousarray(acc.transpose(0, 2, 1), dtype=g.dtype).reshape(weight_size)
    for i0 in range(0, n, imgs):
        xp = planes[i0]
        m = len(xp)
        np.copyto(win[:m], _windows(xp, groups, (kh, kw), (oh, ow), stride, dilation))
        matmul(cols[:m], g4[i0:i0 + m].transpose(0, 1, 3, 2), out=part[:m])
        acc += part[:m].sum(0) if m > 1 else part[0]
    return np.ascontiguousarray(acc.transpose(0, 2, 1), dtype=g.dtype).reshape(weight_size)


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
      grad_fn="ConvolutionBackward0", vjp=_convolution_vjp, eager_kernel="shaped",
      autocast="lower")
defop("convolution_backward_input", _backward_input, args=("grad_output", "weight"),
      save=("grad_output", "weight"), grad_fn="ConvolutionBackwardBackward0",
      vjp=_backward_input_vjp, eager_kernel="shaped")
defop("convolution_backward_weight", _backward_weight, args=("grad_output", "input"),
      save=("grad_output", "input"), grad_fn="ConvolutionBackwardBackward0",
      vjp=_backward_weight_vjp, eager_kernel="shaped")
