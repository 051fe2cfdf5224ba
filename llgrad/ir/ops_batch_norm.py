"""batch_norm, and its backward in training mode as an op of its own (PyTorch's nodes:
NativeBatchNormBackward0, and NativeBatchNormBackwardBackward0 when differentiated again).

    batch_norm(x (N, C, *), weight, bias, running_mean, running_var; training, eps)
        y = (x - mean) / sqrt(var + eps) * weight + bias, per channel: the batch's statistics
        over (0, 2, ...) in training (biased variance), the running ones in evaluation; in
        float64 and rounded once to x's dtype (PyTorch accumulates its statistics in float64
        too, and native code computes all of it in float64)
    batch_norm_with_stats(x, weight, bias; eps) -> (y, mean, var)
        batch_norm in training, and the batch's mean and unbiased variance per channel
        (float64, rounded once to x's dtype) that F.batch_norm updates the running ones with
    batch_norm_backward(grad_out, x, weight; eps) -> (grad_input, grad_weight, grad_bias)
        the training-mode VJP: layer_norm's formula (ops_nn._norm_vjp) over (0, 2, ...)

Both implementations walk x a few channels at a time: a block of channels is copied once
into a contiguous (k, N, L) buffer (L = H * W * ...) that stays in the core's cache, where
every further pass is a contiguous one with a per-channel operand NumPy broadcasts cheaply
(a pass over x's own (N, k, L) rows, strided, costs 2-3x). Sums are BLAS dot products of the
buffer's rows (NumPy's matmul of (1, L) by (L, 1) rows: a cblas dot per row, which OpenBLAS
keeps on one thread up to 10000 elements), the rows' sums added in float64; rows shorter
than _SHORT are summed by NumPy.

Forward: the statistics in two passes (mean, then the sum of squared deviations: no
cancellation) over a float64 copy of the block, then y = (x - mean) * (weight / sqrt(var +
eps)) + bias in two passes, the last one writing y rounded to x's dtype. For float32 data
every float64 step is exact to ~1e-16 and no float64 intermediate can over- or underflow,
so the result is the formula's rounded once (special values as native code); float64 data
divides by sqrt(var + eps) and multiplies by the weight, in native code's order.
_reference is the formula on whole arrays (other dtypes, and float64 data with float32
operands, which it reads in float32). In training the forward leaves the batch's
statistics for batch_norm_with_stats to return (take_stats): no second pass.

Backward: per channel, with xc = x - mean (mean rounded to the data's dtype, as native code),
r = rsqrt(var + eps) and the sums S_g = sum(g), S_gx = sum(g * xc),
    grad_input = r w (g - S_g / m - xc r^2 S_gx / m),  grad_weight = r S_gx,  grad_bias = S_g
(_norm_vjp's mean(g w) = w S_g / m, mean(g w xhat) = w r S_gx / m): x's and g's blocks are
copied in once, four sums, five passes over the buffers (xc, then grad_input). Where a
weight or a block's sums are not all finite (NaN, inf, or an overflow) the block runs
_norm_vjp's operations in its order and dtype (_exact_block) instead. Native code
(codegen/lowerings/ops_batch_norm_backward.py) runs these formulas and this choice per
channel, so special values come out the same."""
import threading
import weakref

import numpy as np

from .optable import defop

BLOCK = 1 << 17         # elements per block (the forward's float64 buffer: 1 MB)
_SHORT = 64             # rows shorter than this are summed by NumPy (a BLAS call per row costs)


def _blocks(c, per_channel):
    """[(c0, c1)]: channels in blocks of about BLOCK elements."""
    k = max(1, min(c, BLOCK // max(1, per_channel)))
    return [(c0, min(c, c0 + k)) for c0 in range(0, c, k)]


def _sums(a, b=None, ones=None, out=None):
    """Per-channel sum(a * b) (or sum(a)) of (k, N, L) blocks, in float64: a BLAS dot per row
    (the products not rounded first: fused multiply-adds), the rows' sums added in float64.
    ones: np.ones((L, 1), a.dtype), if at hand."""
    if a.shape[-1] < _SHORT:
        return np.add.reduce(a if b is None else a * b, axis=(1, 2), dtype=np.float64, out=out)
    if b is None:
        b = np.ones((a.shape[-1], 1), a.dtype) if ones is None else ones
    else:
        b = b[..., :, None]
    return np.add.reduce(np.matmul(a[..., None, :], b), axis=(1, 2, 3), dtype=np.float64,
                         out=out)


def _channel(v, c0, c1, dtype=np.float64):
    return np.asarray(v[c0:c1], dtype).reshape(-1, 1, 1)


# ---- forward --------------------------------------------------------------------------------

def _bn_shape(x, v):
    return v.reshape((1, -1) + (1,) * (x.ndim - 2))


def _reference(x, w, b, mean, var, training, eps):
    dt = x.dtype
    if dt == np.float32:    # in float64 throughout and rounded once, as native code
        x, w, b, mean, var = (v if v is None else np.asarray(v, np.float64)
                              for v in (x, w, b, mean, var))
    elif dt == np.float16:  # (in float32, as PyTorch's kernel: squares overflow float16)
        x, w, b, mean, var = (v if v is None else np.asarray(v, np.float32)
                              for v in (x, w, b, mean, var))
    dims = (0,) + tuple(range(2, x.ndim))
    if training:
        with np.errstate(over="ignore", invalid="ignore"):  # (ndarray.mean warns as numpy's)
            mean = x.mean(axis=dims, keepdims=True)
            var = ((x - mean) ** 2).mean(axis=dims, keepdims=True)
    else:
        mean, var = _bn_shape(x, mean), _bn_shape(x, var)
    y = (x - mean) / np.sqrt(var + eps)
    if w is not None:
        y = y * _bn_shape(x, w)
    if b is not None:
        y = y + _bn_shape(x, b)
    return y.astype(dt, copy=False)


def _centre(d, ones=None):
    """Subtract each channel's mean from a float64 (k, N, L) block in place: (mean, sum of
    squared deviations), each (k,)."""
    mean = _sums(d, ones=ones) / (d.shape[1] * d.shape[2])
    np.subtract(d, mean.reshape(-1, 1, 1), out=d)
    return mean, _sums(d, d)


_stash = threading.local()      # the last training forward's statistics on this thread


def _blocked(x):
    """x as (N, C, L), its blocks, a float64 buffer for one and _sums' ones."""
    n, c = x.shape[:2]
    x3 = x.reshape(n, c, -1)
    blocks = _blocks(c, n * x3.shape[2])
    return x3, blocks, np.empty((blocks[0][1], n, x3.shape[2])), np.ones((x3.shape[2], 1))


_native_stats = [None]      # compile/eager_bn_stats.py's native loop, when installed


def set_native_stats(fn):
    """Compute batch_stats of C-contiguous arrays with fn(x) -> (mean, ss, count) or None
    (not ready: NumPy computes them); fn None: always NumPy. Returns the previous fn."""
    prev, _native_stats[0] = _native_stats[0], fn
    return prev


def batch_stats(x):
    """(mean, sum of squared deviations, count) per channel of x (N, C, *) over (0, 2, ...)
    in float64, as the training forward computes them; None for what it does not block."""
    if x.ndim < 2 or x.size == 0 or x.dtype not in (np.float32, np.float64):
        return None
    if _native_stats[0] is not None and x.flags.c_contiguous:
        got = _native_stats[0](x)
        if got is not None:
            return got
    x3, blocks, d, ones = _blocked(x)
    mean, ss = np.empty(x3.shape[1]), np.empty(x3.shape[1])
    for c0, c1 in blocks:
        dk = d[:c1 - c0]
        np.copyto(dk, x3[:, c0:c1].transpose(1, 0, 2))
        mean[c0:c1], ss[c0:c1] = _centre(dk, ones)
    return mean, ss, x.size // x3.shape[1]


def take_stats(x):
    """batch_stats(x): those the training forward of this very array left on this thread,
    else computed."""
    ref = getattr(_stash, "entry", None)
    _stash.entry = None
    if ref is not None and ref[0]() is x:
        return ref[1]
    return batch_stats(x)


def _batch_norm(x, w, b, mean, var, training, eps):
    if x.size == 0 or x.dtype not in (np.float32, np.float64) \
            or (x.dtype == np.float64
                and any(v is not None and v.dtype != np.float64 for v in (w, b, mean, var))):
        return _reference(x, w, b, mean, var, training, eps)
    fused = x.dtype == np.float32       # (see the module's docstring)
    x3, blocks, d, ones = _blocked(x)
    y = np.empty(x3.shape, x.dtype)
    c = x3.shape[1]
    stats = (np.empty(c), np.empty(c)) if training else None
    for c0, c1 in blocks:
        dk = d[:c1 - c0]
        np.copyto(dk, x3[:, c0:c1].transpose(1, 0, 2))
        if training:
            mu, ss = _centre(dk, ones)
            stats[0][c0:c1], stats[1][c0:c1] = mu, ss
            v = ss.reshape(-1, 1, 1) / (dk.shape[1] * dk.shape[2])
        else:
            np.subtract(dk, _channel(mean, c0, c1), out=dk)
            v = _channel(var, c0, c1)
        if fused:
            s = np.sqrt(v + eps)
            np.multiply(dk, _channel(w, c0, c1) / s if w is not None else 1.0 / s, out=dk)
        else:
            np.divide(dk, np.sqrt(v + eps), out=dk)
            if w is not None:
                np.multiply(dk, _channel(w, c0, c1), out=dk)
        out = y[:, c0:c1].transpose(1, 0, 2)
        if b is not None:
            np.add(dk, _channel(b, c0, c1), out=out, casting="unsafe")
        else:
            np.copyto(out, dk, casting="unsafe")
    if training:
        _stash.entry = (weakref.ref(x), stats + (x.size // c,))
    return y.reshape(x.shape)


def _batch_norm_vjp(c, g):
    x, w = c.self, c.weight
    if c.training:
        gx, gw, gb = g._op("batch_norm_backward", x, w, eps=c.eps)
    else:
        dims = (0,) + tuple(range(2, x.ndim))
        shape = (1, -1) + (1,) * (x.ndim - 2)
        rstd = (c.running_var + c.eps).rsqrt().reshape(shape)
        xhat = (x - c.running_mean.reshape(shape)) * rstd
        gx = g * rstd * w.reshape(shape) if w is not None else g * rstd
        gw, gb = (g * xhat).sum(dims), g.sum(dims)
    return (gx if c.needs(0) else None, gw if c.needs(1) else None,
            gb if c.needs(2) else None, None, None)


defop("batch_norm", _batch_norm, args=("self", "weight", "bias", "running_mean", "running_var"),
      save=("self", "weight", "running_mean", "running_var"),
      grad_fn="NativeBatchNormBackward0", vjp=_batch_norm_vjp,
      nondiff=("running_mean", "running_var"), eager_kernel="shaped",
      eager_min_elements=4096)


def _batch_norm_with_stats(x, w, b, eps):
    y = _batch_norm(x, w, b, None, None, True, eps)
    stats = take_stats(x)
    with np.errstate(all="ignore"):     # (one value per channel: 0 / 0, NaN as PyTorch's)
        if stats is None:   # (a dtype the blocks do not take: float64 sums over it)
            dims = (0,) + tuple(range(2, x.ndim))
            x64 = x.astype(np.float64)
            mean, var = x64.mean(axis=dims), x64.var(axis=dims, ddof=1)
        else:
            mean, ss, count = stats
            var = ss / (count - 1)
    return y, mean.astype(x.dtype), np.asarray(var).astype(x.dtype)


def _batch_norm_with_stats_vjp(c, gs):
    if gs[0] is None:       # (the statistics have no gradient: F.batch_norm detaches them)
        return None, None, None
    gx, gw, gb = gs[0]._op("batch_norm_backward", c.self, c.weight, eps=c.eps)
    return (gx if c.needs(0) else None, gw if c.needs(1) else None,
            gb if c.needs(2) else None)


# batch_norm in training, and the batch's per-channel mean and unbiased variance (float64,
# rounded once to x's dtype) as its second and third results, which F.batch_norm's update of
# the running statistics reads: its kernel writes them on the way, where a mean and a var of
# the input were two or three more passes over it in a compiled step
defop("batch_norm_with_stats", _batch_norm_with_stats, args=("self", "weight", "bias"), nout=3,
      save=("self", "weight"), grad_fn="NativeBatchNormBackward0",
      vjp=_batch_norm_with_stats_vjp, eager_kernel="shaped", eager_min_elements=4096)


# ---- backward (training) --------------------------------------------------------------------

def _exact_block(gt, xt, wk, mean, eps, dt, out):
    """_norm_vjp's operations in its order and dtype on a block: gt, xt (k, N, L) views of
    g and x, wk (k, 1, 1) or None; gx into out; (grad_weight, grad_bias) of the block."""
    m = xt.shape[1] * xt.shape[2]
    xh = np.subtract(xt, mean, dtype=dt)                         # xc
    var = (_sums(xh, xh) / m).astype(dt).reshape(-1, 1, 1)
    rstd = 1.0 / np.sqrt(var + dt.type(eps))                    # (rsqrt's impl)
    np.multiply(xh, rstd, out=xh)                               # xhat
    gxh = np.multiply(gt, wk, dtype=dt) if wk is not None else np.array(gt, dt)
    m1 = (_sums(gxh) / m).astype(dt).reshape(-1, 1, 1)
    t = gxh * xh
    s2 = _sums(t)
    m2 = (s2 / m).astype(dt).reshape(-1, 1, 1)
    if wk is not None:                                          # (else g * xhat is t)
        np.multiply(gt, xh, out=t)
        s2 = _sums(t)
    gb = _sums(gt)
    np.subtract(gxh, m1, out=gxh)
    np.multiply(xh, m2, out=t)
    np.subtract(gxh, t, out=gxh)
    np.multiply(rstd, gxh, out=out)
    return s2, gb


def _batch_norm_backward(g, x, w, eps):
    n, c = x.shape[:2]
    dt = np.result_type(g, x)
    if dt == np.float16:    # (in float32, as PyTorch's kernel: squares overflow float16)
        return tuple(r.astype(dt) for r in _batch_norm_backward(
            g.astype(np.float32), x.astype(np.float32),
            None if w is None else w.astype(np.float32), eps))
    length = int(np.prod(x.shape[2:], dtype=np.int64))
    x3, g3 = x.reshape(n, c, length), g.reshape(n, c, length)
    m = n * length
    gx = np.empty(x3.shape, dt)
    gw, gb = np.zeros(c, dt), np.zeros(c, dt)
    if gx.size == 0:    # (no elements per channel: the sums are zero, gx is empty)
        return gx.reshape(x.shape), gw, gb
    blocks = _blocks(c, m)
    xc, gc = (np.empty((blocks[0][1], n, length), dt) for _ in range(2))
    fast = dt in (np.float32, np.float64) and (w is None or np.isfinite(w).all())
    w64 = np.asarray(w, np.float64) if w is not None else None
    ones, eps_dt = np.ones((length, 1), dt), dt.type(eps)
    with np.errstate(all="ignore"):     # special values: inf - inf, 0 * inf, as eager's ops
        for c0, c1 in blocks:
            xt, gt = x3[:, c0:c1].transpose(1, 0, 2), g3[:, c0:c1].transpose(1, 0, 2)
            out = gx[:, c0:c1].transpose(1, 0, 2)
            xk, gk = xc[:c1 - c0], gc[:c1 - c0]
            np.copyto(xk, xt)       # (x's and g's rows are strided: read once, into the cache)
            mean = (_sums(xk, ones=ones) / m).astype(dt).reshape(-1, 1, 1)
            if fast:
                np.subtract(xk, mean, out=xk)
                np.copyto(gk, gt)
                sums = np.empty((3, c1 - c0))       # sum(xc^2), sum(g), sum(g * xc)
                _sums(xk, xk, out=sums[0])
                _sums(gk, ones=ones, out=sums[1])
                _sums(gk, xk, out=sums[2])
            if not fast or not np.isfinite(sums).all():
                wk = _channel(w, c0, c1, dt) if w is not None else None
                gw[c0:c1], gb[c0:c1] = _exact_block(gt, xt, wk, mean, eps, dt, out)
                continue
            r = 1.0 / np.sqrt((sums[0] / m).astype(dt) + eps_dt)   # rsqrt(var + eps), in dt
            gw[c0:c1], gb[c0:c1] = r * sums[2], sums[1]
            r = r.astype(np.float64)
            sums[0] = -(r * r) * (sums[2] / m)      # gx = a (g - sum(g) / m + xc * that)
            sums[1] /= m
            sums[2] = r * w64[c0:c1] if w is not None else r
            coef = sums.astype(dt)[..., None, None]
            np.multiply(xk, coef[0], out=xk)
            np.subtract(xk, coef[1], out=xk)
            np.add(xk, gk, out=xk)
            np.multiply(xk, coef[2], out=out)
    return gx.reshape(x.shape), gw, gb


def _batch_norm_backward_vjp(c, gs):
    """The backward's derivative. Per channel, with m elements, xh = (x - mean) * r,
    r = rsqrt(var + eps), A = mean(g * xh), and the cotangents u (of grad_input), v, s:
        d/dg = w r (u - mean(u) - xh * B / m) + v xh + s,            B = sum(u * xh)
        d/dx = -(w r^2 / m) ((U - 3 A B) xh + B (g - mean(g)) + m A (u - mean(u)))
               + v r (g - mean(g) - A xh),                            U = sum(u (g - mean(g)))
        d/dw = r sum(u (g - mean(g) - A xh))"""
    g, x, w = c.grad_out, c.self, c.weight
    u, v, s = gs
    dims = (0,) + tuple(range(2, x.dim()))
    shape = (1, -1) + (1,) * (x.dim() - 2)
    m = x.numel() // x.shape[1]
    xc = x - x.mean(dims, keepdim=True)
    r = ((xc * xc).mean(dims, keepdim=True) + c.eps).rsqrt()
    xh = xc * r
    wr = r * w.reshape(shape) if w is not None else r
    gc = g - g.mean(dims, keepdim=True)
    a = (g * xh).mean(dims, keepdim=True)
    uc = u - u.mean(dims, keepdim=True)
    bs = (u * xh).sum(dims, keepdim=True)
    vb = v.reshape(shape)
    out = [None] * 3
    if c.needs(0):
        out[0] = wr * (uc - xh * (bs / m)) + vb * xh + s.reshape(shape)
    if c.needs(1):
        us = (u * gc).sum(dims, keepdim=True)
        out[1] = (-(wr * r / m) * ((us - 3 * a * bs) * xh + bs * gc + (m * a) * uc)
                  + vb * r * (gc - a * xh))
    if c.needs(2):
        out[2] = (r * (u * (gc - xh * a)).sum(dims, keepdim=True)).reshape(-1)
    return tuple(out)


defop("batch_norm_backward", _batch_norm_backward, args=("grad_out", "self", "weight"), nout=3,
      save=("grad_out", "self", "weight"), promote=(0, 1),
      grad_fn="NativeBatchNormBackwardBackward0", vjp=_batch_norm_backward_vjp,
      eager_kernel="shaped",
      # (from 512 elements the kernel's one call beats the NumPy passes' ~15 dispatches:
      # BatchNorm1d(16) on a batch of 64, 355 -> 252 us forward + backward)
      eager_min_elements=512)
