"""batch_norm, and its backward in training mode as an op of its own (PyTorch's nodes:
NativeBatchNormBackward0, and NativeBatchNormBackwardBackward0 when differentiated again).

    batch_norm(x (N, C, *), weight, bias, running_mean, running_var; training, eps)
        y = (x - mean) / sqrt(var + eps) * weight + bias, per channel: the batch's statistics
        over (0, 2, ...) in training, the running ones in evaluation; in float64 and rounded
        once to x's dtype (PyTorch's statistics are float64 too, and native code does the same)
    batch_norm_backward(grad_out, x, weight; eps) -> (grad_input, grad_weight, grad_bias)
        the training-mode VJP: layer_norm's formula (ops_nn._norm_vjp) over (0, 2, ...)

Both implementations walk x one channel at a time, as (N, L) blocks with L = H * W * ...
(several channels per block where a channel is small): a block's temporaries stay in the
core's cache, so the dozen elementwise passes of the formulas cost cache bandwidth, not
memory bandwidth, and NumPy sees one scalar per channel (a per-channel operand broadcast
along a middle axis runs NumPy's slow strided loop, ~3x a scalar's).

The forward is bit for bit the whole-array NumPy formula it replaced (_reference, kept for
the layouts and dtypes the blocks do not reproduce): the same per-(image, channel) pairwise
sums, added in image order. The backward runs _norm_vjp's elementwise operations in its order
and dtype, so special values (NaN, inf, signed zeros) come out as in native code, which runs
the decomposition below; its sums add each row by BLAS and the rows in float64 (native code
sums in float64; NumPy's float32 mean had summed in float32)."""
import numpy as np

from .graph import Value
from .optable import defop

BLOCK = 1 << 15         # elements per block: the forward's two float64 temporaries, 512 KB


def _blocks(c, rows):
    """[(c0, c1)]: channels in blocks of about BLOCK elements (a channel is `rows` elements)."""
    k = max(1, min(c, BLOCK // max(1, rows)))
    return [(c0, min(c, c0 + k)) for c0 in range(0, c, k)]


def _channel(v, dtype, c0, c1):
    """Per-channel values v[c0:c1] as (1, k, 1) of dtype, to broadcast over a block."""
    return np.asarray(v[c0:c1], dtype).reshape(1, -1, 1)


# ---- forward --------------------------------------------------------------------------------

def _bn_shape(x, v):
    return v.reshape((1, -1) + (1,) * (x.ndim - 2))


def _reference(x, w, b, mean, var, training, eps):
    dt = x.dtype
    if dt == np.float32:    # in float64 throughout and rounded once, as native code (PyTorch's
        # statistics are float64 too): the variance of values near float32's max is finite
        x, w, b, mean, var = (v if v is None else np.asarray(v, np.float64)
                              for v in (x, w, b, mean, var))
    dims = (0,) + tuple(range(2, x.ndim))
    if training:
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


def _block_mean(a, count):
    """NumPy's mean over (0, 2) of a (N, k, L) block of a C-contiguous array, bit for bit: its
    reduction sums each row pairwise, then adds the row sums in image order to a zero."""
    s = np.add.reduce(a, axis=2)
    return ((np.add.accumulate(s, axis=0)[-1] + 0.0) / count).reshape(1, -1, 1)


def _batch_norm(x, w, b, mean, var, training, eps):
    # the blocks reproduce _reference for a C-contiguous x whose operands _reference reads in
    # float64 (a float64 x with float32 statistics takes sqrt(var + eps) in float32 there)
    if x.size == 0 or not x.flags.c_contiguous or x.dtype not in (np.float32, np.float64) \
            or (x.dtype == np.float64
                and any(v is not None and v.dtype != np.float64 for v in (w, b, mean, var))):
        return _reference(x, w, b, mean, var, training, eps)
    n, c = x.shape[:2]
    count = x.size // c
    # one channel: NumPy's reduction runs over the whole array at once (its axes coalesce)
    x3 = x.reshape(n, c, -1) if c > 1 else x.reshape(1, 1, -1)
    rows, length = x3.shape[0], x3.shape[2]
    y = np.empty(x3.shape, x.dtype)
    blocks = _blocks(c, rows * length)
    k = blocks[0][1]
    d, sq = np.empty((rows, k, length)), np.empty((rows, k, length) if training else 0)
    for c0, c1 in blocks:
        dk = d[:, :c1 - c0]
        np.copyto(dk, x3[:, c0:c1])
        if training:
            mu = _block_mean(dk, count)
            np.subtract(dk, mu, out=dk)
            sk = sq[:, :c1 - c0]
            np.multiply(dk, dk, out=sk)             # (x - mean) ** 2 is NumPy's square
            v = _block_mean(sk, count)
        else:
            np.subtract(dk, _channel(mean, np.float64, c0, c1), out=dk)
            v = _channel(var, np.float64, c0, c1)
        np.divide(dk, np.sqrt(v + eps), out=dk)
        if w is not None:
            np.multiply(dk, _channel(w, np.float64, c0, c1), out=dk)
        if b is not None:
            np.add(dk, _channel(b, np.float64, c0, c1), out=dk)
        np.copyto(y[:, c0:c1], dk, casting="unsafe")
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
      nondiff=("running_mean", "running_var"))


# ---- backward (training) --------------------------------------------------------------------

def _block_sum(a, ones):
    """Per-channel sums (1, k, 1) of a (N, k, L) block: each row by BLAS (a product with
    ones: NumPy's pairwise sum of float32 runs at a third of its speed), the rows in float64.
    """
    return np.add.reduce(np.matmul(a, ones), axis=0, dtype=np.float64).reshape(1, -1, 1)


def _batch_norm_backward(g, x, w, eps):
    """_norm_vjp's operations, block by block: mean, xc = x - mean, rstd, xhat = xc * rstd,
    gxhat = g * w, gx = rstd * (gxhat - mean(gxhat) - xhat * mean(gxhat * xhat)),
    gw = sum(g * xhat), gb = sum(g); each mean a float64 sum rounded to x's dtype. The
    temporaries are contiguous blocks (an op over x's or g's strided rows costs twice one
    over a contiguous block), gx's block is written once."""
    n, c = x.shape[:2]
    dt = np.result_type(g, x)
    length = int(np.prod(x.shape[2:], dtype=np.int64))
    x3, g3 = x.reshape(n, c, length), g.reshape(n, c, length)
    m = n * length
    gx = np.empty(x3.shape, dt)
    gw, gb = np.zeros(c, dt), np.zeros(c, dt)
    if gx.size == 0:    # (no elements per channel: the sums are zero, gx is empty)
        return gx.reshape(x.shape), gw, gb
    blocks = _blocks(c, m)
    k = blocks[0][1]
    xh, gxh, t = (np.empty((n, k, x3.shape[2]), dt) for _ in range(3))
    ones = np.ones(x3.shape[2], dt)
    with np.errstate(all="ignore"):     # special values: inf - inf, 0 * inf, as eager's ops
        for c0, c1 in blocks:
            sl = slice(0, c1 - c0)
            xb, gb_, xhb, gxhb, tb = x3[:, c0:c1], g3[:, c0:c1], xh[:, sl], gxh[:, sl], t[:, sl]
            mean = (_block_sum(xb, ones) / m).astype(dt)
            np.subtract(xb, mean, out=xhb)                          # xc
            np.multiply(xhb, xhb, out=tb)
            var = (_block_sum(tb, ones) / m).astype(dt)
            rstd = 1.0 / np.sqrt(var + dt.type(eps))                # (rsqrt's impl)
            np.multiply(xhb, rstd, out=xhb)                         # xhat
            if w is not None:
                np.multiply(gb_, _channel(w, dt, c0, c1), out=gxhb)
            else:
                np.copyto(gxhb, gb_)
            m1 = (_block_sum(gxhb, ones) / m).astype(dt)
            np.multiply(gxhb, xhb, out=tb)
            s2 = _block_sum(tb, ones)
            m2 = (s2 / m).astype(dt)
            if w is not None:                                       # (else g * xhat is tb)
                np.multiply(gb_, xhb, out=tb)
                s2 = _block_sum(tb, ones)
            gw[c0:c1] = s2.reshape(-1)
            gb[c0:c1] = _block_sum(gb_, ones).reshape(-1)
            np.subtract(gxhb, m1, out=gxhb)
            np.multiply(xhb, m2, out=tb)
            np.subtract(gxhb, tb, out=gxhb)
            np.multiply(rstd, gxhb, out=gx[:, c0:c1])
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


def _batch_norm_backward_primitives(node, emit):
    """_norm_vjp's primitives, in its order and with its attributes, as _batch_norm_vjp ran
    them before this op existed: native code is what it was (and the forward's statistics
    kernel stays separate: batch_norm has a lowering of its own)."""
    g, x, w = node.inputs
    nd = len(x.type.shape)
    dims = (0,) + tuple(range(2, nd))
    wb = emit("view", [w], shape=(1, x.type.shape[1]) + (1,) * (nd - 2)) \
        if isinstance(w, Value) else None
    mu = emit("mean", [x], dim=dims, keepdim=True)
    xc = emit("sub", [x, mu], alpha=1)
    var = emit("mean", [emit("mul", [xc, xc])], dim=dims, keepdim=True)
    rstd = emit("rsqrt", [emit("add", [var, node.attrs["eps"]], alpha=1)])
    xhat = emit("mul", [xc, rstd])
    gxhat = emit("mul", [g, wb]) if wb is not None else g
    centred = emit("sub", [gxhat, emit("mean", [gxhat], dim=dims, keepdim=True)], alpha=1)
    m2 = emit("mean", [emit("mul", [gxhat, xhat])], dim=dims, keepdim=True)
    gx = emit("mul", [rstd, emit("sub", [centred, emit("mul", [xhat, m2])], alpha=1)])
    gw = emit("sum", [emit("mul", [g, xhat])], dim=dims, keepdim=False)
    return gx, gw, emit("sum", [g], dim=dims, keepdim=False)


defop("batch_norm_backward", _batch_norm_backward, args=("grad_out", "self", "weight"), nout=3,
      save=("grad_out", "self", "weight"), promote=(0, 1),
      grad_fn="NativeBatchNormBackwardBackward0", vjp=_batch_norm_backward_vjp,
      decompose=_batch_norm_backward_primitives)
