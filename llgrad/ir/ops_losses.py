"""The losses PyTorch runs as ops of their own: smooth_l1_loss, huber_loss and
binary_cross_entropy (SmoothL1LossBackward0, HuberLossBackward0,
BinaryCrossEntropyBackward0). Each impl follows PyTorch's CPU kernel, each VJP its backward
formula; native code runs each as its decomposition (elementwise ops and one sum or mean,
which fuse into one loop). l1_loss and kl_div are compositions, as in PyTorch
(llgrad/nn/functional_loss.py)."""
import numpy as np

from .ops_nn import _reduce, _target_as_input
from .optable import defop


def _numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def _scaled(c, g, shape):
    """g times the reduction's normalisation (1/n for a mean)."""
    if c.reduction == "mean":
        n = _numel(shape)
        return g / n if n else g * np.nan
    return g


def _reduced(emit, loss, reduction):
    if reduction == "none":
        return loss
    return emit("mean" if reduction == "mean" else "sum", [loss], dim=None, keepdim=False)


# ---- smooth_l1_loss and huber_loss -----------------------------------------------------------

def _piecewise(x, t, k, quad_div, lin_mul):
    """where(z < k, 0.5 * z * z [/ k], [k *] (z - 0.5 * k)), z = |x - t|, reusing its
    buffers (the same roundings, in the same order: a division or product by 1 is the
    value itself)."""
    z = np.subtract(x, t)
    if not z.ndim:          # (0-d: NumPy's scalars take no out=)
        z = np.abs(z)
        return np.asarray(np.where(z < k, 0.5 * z * z / quad_div, lin_mul * (z - 0.5 * k)),
                          np.result_type(x, t))
    np.abs(z, out=z)
    quad = np.multiply(z, 0.5)
    np.multiply(quad, z, out=quad)
    if quad_div != 1:
        np.divide(quad, quad_div, out=quad)
    lin = np.subtract(z, 0.5 * k)
    if lin_mul != 1:
        np.multiply(lin, lin_mul, out=lin)
    return np.where(z < k, quad, lin).astype(np.result_type(x, t), copy=False)


def _smooth_l1(x, t, reduction="mean", beta=1.0):
    return _reduce(_piecewise(x, t, beta, beta, 1), reduction)


def _smooth_l1_vjp(c, g):
    d = c.self - _target_as_input(c)
    # (PyTorch's branches: sign(d) from |d| = beta on, so the second derivative there is 0)
    gd = _scaled(c, g, d.shape) * d.sign().where(d.abs() >= c.beta, d / c.beta)  # (NaN: NaN)
    return (gd if c.needs(0) else None, -gd if c.needs(1) else None)


def _huber(x, t, reduction="mean", delta=1.0):
    if np.result_type(x, t) == np.float16:
        # (PyTorch's huber kernel computes float16 in float32 and rounds once; its
        # smooth_l1 kernel in float16 step by step)
        loss = _piecewise(np.asarray(x, np.float32), np.asarray(t, np.float32), delta, 1, delta)
        return _reduce(loss.astype(np.float16), reduction)
    return _reduce(_piecewise(x, t, delta, 1, delta), reduction)


def _huber_vjp(c, g):
    d = c.self - c.target
    gd = _scaled(c, g, d.shape) * (d.sign() * c.delta).where(d.abs() >= c.delta, d)
    return (gd if c.needs(0) else None, -gd if c.needs(1) else None)


def _piecewise_primitives(node, emit):
    """where(z < k, 0.5 * z * z [/ beta], [delta *] (z - 0.5 * k)), z = |x - t|."""
    x, t = node.inputs[:2]
    huber = node.op == "huber_loss"
    k = node.attrs.get("delta" if huber else "beta", 1.0)
    z = emit("abs", [emit("sub", [x, t], alpha=1)])
    quad = emit("mul", [emit("mul", [z, 0.5]), z])
    lin = emit("sub", [z, 0.5 * k], alpha=1)
    if huber:
        lin = emit("mul", [lin, k]) if k != 1 else lin
    else:
        quad = emit("div", [quad, k])
    loss = emit("where", [emit("lt", [z, k]), quad, lin])
    return _reduced(emit, loss, node.attrs.get("reduction", "mean"))


defop("smooth_l1_loss", _smooth_l1, args=("self", "target"), save=("self", "target"),
      grad_fn="SmoothL1LossBackward0", promote=(0, 1), vjp=_smooth_l1_vjp,
      decompose=_piecewise_primitives, autocast="fp32")
defop("huber_loss", _huber, args=("self", "target"), save=("self", "target"),
      grad_fn="HuberLossBackward0", promote=(0, 1), vjp=_huber_vjp,
      decompose=_piecewise_primitives, autocast="fp32")


# ---- binary_cross_entropy ----------------------------------------------------------------

def _bce(x, t, w, reduction="mean"):
    # PyTorch's kernel: (t - 1) * max(log1p(-x), -100) - t * max(log(x), -100), times w
    with np.errstate(divide="ignore", invalid="ignore"):
        loss = (t - 1) * np.maximum(np.log1p(-x), -100) - t * np.maximum(np.log(x), -100)
    if w is not None:
        loss = loss * w
    return _reduce(np.asarray(loss, dtype=x.dtype), reduction)


EPSILON = float(np.float32(1e-12))


def _bce_vjp(c, g):
    x, t, w = c.self, c.target, c.weight
    g = _scaled(c, g, x.shape)
    if w is not None:
        g = g * w
    # (ATen's EPSILON is a float: 1e-12 rounded to float32, in a float64 loss too)
    gx = g * (x - t) / ((1 - x) * x).clamp_min(EPSILON) if c.needs(0) else None
    # PyTorch's binary_cross_entropy_target_backward: -logit(x)
    gt = g * -(x / (1 - x)).log() if c.needs(1) else None
    return (gx, gt, None)


def _bce_primitives(node, emit):
    x, t, w = node.inputs[:3]
    log1m = emit("clamp_min", [emit("log1p", [emit("neg", [x])]), -100])
    logx = emit("clamp_min", [emit("log", [x]), -100])
    loss = emit("sub", [emit("mul", [emit("sub", [t, 1], alpha=1), log1m]),
                        emit("mul", [t, logx])], alpha=1)
    if w is not None:
        loss = emit("mul", [loss, w])
    return _reduced(emit, loss, node.attrs.get("reduction", "mean"))


defop("binary_cross_entropy", _bce, args=("self", "target", "weight"),
      save=("self", "target", "weight"), grad_fn="BinaryCrossEntropyBackward0",
      promote=(0, 1, 2), vjp=_bce_vjp, nondiff=("weight",), decompose=_bce_primitives,
      autocast="fp32")
