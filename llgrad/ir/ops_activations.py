"""The activations PyTorch runs as ops of their own (one backward node each, named as
PyTorch names it): elu (selu is elu with a scale), celu, hardtanh (relu6 is hardtanh(0, 6)),
logsigmoid, mish, hardswish, hardsigmoid, threshold and glu. Each impl follows PyTorch's
CPU kernel (its operation order, its NaN behaviour), each VJP its backward formula.
softsign and tanhshrink are compositions in PyTorch and in llgrad.nn.functional.

Native code: elu and celu have elementwise emitters of their own
(codegen/lowerings/ops_activations.py: measured in a fused loop, their decomposition's
forward ran 2x slower); the others are lowered as their decompositions into primitive
elementwise ops, which run as fast and let cse share a training step's forward with the
VJP's recomputation (mish's exp/log1p/tanh)."""
import numpy as np

from . import sigmoid_np
from .ops_elementwise import _half_in_float, zero_linked
from .ops_select import keep_x_at_ties
from .optable import defop


def _unary(name, impl, vjp, grad_fn, save=("self",), cost=1, float_out=True, **kw):
    return defop(name, impl, vjp=vjp, grad_fn=grad_fn, save=save, kind="elementwise",
                 promote=(0,), float_out=float_out, cost=cost, **kw)


def _times(t, k):
    return t if k == 1 else t * k


# ---- elu, selu, celu ----------------------------------------------------------------------

@_half_in_float
def _elu(x, alpha=1.0, scale=1.0, input_scale=1.0):
    # PyTorch's vectorised kernel: expm1(x * input_scale) * (alpha * scale) where x <= 0
    with np.errstate(over="ignore"):
        neg = np.expm1(x * input_scale if input_scale != 1 else x) * (alpha * scale)
    pos = x * scale if scale != 1 else x
    return np.where(x > 0, pos, neg).astype(np.result_type(x), copy=False)


def _negative_part(x):
    # x where x < 0 (or nan), else 0: PyTorch's double backward masks x < 0, so at x == 0
    # (where the first derivative is the negative branch's) the second derivative is 0
    return x.where((x >= 0).logical_not(), 0.0)


def _celu_scale(c):
    # PyTorch's CELU backward takes input_scale = 1.0 / alpha.toFloat() (derivatives.yaml:
    # alpha rounded to float32), its forward 1 / alpha in double
    return 1.0 / float(np.float32(c.alpha))


def _elu_vjp(c, g, input_scale=None):
    x, s = c.self, c.input_scale if input_scale is None else input_scale
    neg = _times((_times(_negative_part(x), s)).exp(), s * c.alpha * c.scale)
    # PyTorch's vectorised kernel tests x > 0, so a nan takes the negative side: nan (its
    # scalar tail, which tests x <= 0 and gives the positive side's scale, sees only the last
    # elements of a row shorter than two vectors, a count that depends on the host)
    return (_times(g, c.scale).where(x > 0, g * neg),)


def _elu_result_vjp(c, g, input_scale=None):
    # in place (elu_, celu_): the input is gone; PyTorch differentiates from the result,
    # which says x > 0 only for a non-negative alpha
    if c.alpha < 0:
        raise RuntimeError("In-place elu backward calculation is triggered with a negative "
                           "slope which is not supported. This is caused by calling in-place "
                           "forward function with a negative slope, please call out-of-place "
                           "version instead.")
    r, s = c.result, c.input_scale if input_scale is None else input_scale
    neg = g * ((_negative_part(r) + c.alpha * c.scale) * s)
    return (_times(g, c.scale).where(r > 0, neg),)


def _celu_vjp(c, g):
    return _elu_vjp(c, g, _celu_scale(c))


def _celu_result_vjp(c, g):
    return _elu_result_vjp(c, g, _celu_scale(c))


_unary("elu", _elu, _elu_vjp, "EluBackward0", cost=4,
       eager_native=True)
_unary("elu_", _elu, _elu_result_vjp, "EluBackward1", save=("result",), cost=4,
       eager_native=True)
_unary("celu", _elu, _celu_vjp, "CeluBackward0", cost=4,
       eager_native=True)
_unary("celu_", _elu, _celu_result_vjp, "CeluBackward1", save=("result",), cost=4,
       eager_native=True)


# ---- hardtanh, hardsigmoid, hardswish, threshold --------------------------------------------

def _hardtanh(x, min_val=-1.0, max_val=1.0):
    # (x second, as clamp: a tie keeps x, so relu6(-0.0) is -0.0 as in PyTorch)
    lo = keep_x_at_ties(np.maximum, np.asarray(min_val, x.dtype), x)
    return keep_x_at_ties(np.minimum, np.asarray(max_val, x.dtype), lo)


def _hardtanh_vjp(c, g):
    x = c.self
    # (PyTorch's test, x <= min or x >= max: a NaN passes the gradient)
    return (zero_linked(c, g.masked_fill((x <= c.min_val) | (x >= c.max_val), 0), x),)


def _hardtanh_primitives(node, emit):
    return emit("clamp", [node.inputs[0], node.attrs.get("min_val", -1.0),
                          node.attrs.get("max_val", 1.0)])


_unary("hardtanh", _hardtanh, _hardtanh_vjp, "HardtanhBackward0", float_out=False,
       decompose=_hardtanh_primitives, eager_native=True)


@_half_in_float
def _hardsigmoid(x):
    return (np.minimum(np.maximum(x + 3, 0), 6) / 6).astype(x.dtype, copy=False)


# PyTorch's backward multiplies by 1/6 rounded to single precision (its kernel's constant)
_ONE_SIXTH_F32 = float(np.float32(1.0 / 6.0))
def _relu6_shifted(emit, x):
    return emit("clamp", [emit("add", [x, 3], alpha=1), 0, 6])


_unary("hardsigmoid", _hardsigmoid,
       lambda c, g: ((g * _ONE_SIXTH_F32).where((c.self > -3) & (c.self < 3), 0),),
       "HardsigmoidBackward0",
       decompose=lambda node, emit: emit("div", [_relu6_shifted(emit, node.inputs[0]), 6]),
       eager_native=True)


@_half_in_float     # (x * 6 past float16's range: PyTorch's kernel computes in float32)
def _hardswish(x):
    return (x * np.minimum(np.maximum(x + 3, 0), 6) / 6).astype(x.dtype, copy=False)


def _hardswish_vjp(c, g):
    x = c.self
    # PyTorch's kinks: 0 at x = -3, 1 at x = 3 (and at NaN: x < 3 is false)
    d = (x / 3 + 0.5).masked_fill((x < 3).logical_not(), 1).masked_fill(x <= -3, 0)
    return (g * d,)


def _hardswish_primitives(node, emit):
    x = node.inputs[0]
    return emit("div", [emit("mul", [x, _relu6_shifted(emit, x)]), 6])


_unary("hardswish", _hardswish, _hardswish_vjp, "HardswishBackward0",
       decompose=_hardswish_primitives,
       eager_native=True)


def _threshold(x, threshold, value):
    return np.where(x <= threshold, np.asarray(value, x.dtype), x)


def _threshold_primitives(node, emit):
    x = node.inputs[0]
    return emit("where", [emit("le", [x, node.attrs["threshold"]]), node.attrs["value"], x])


_unary("threshold", _threshold,
       lambda c, g: (zero_linked(c, g.masked_fill(c.self <= c.threshold, 0), c.self),),
       "ThresholdBackward0",
       float_out=False, decompose=_threshold_primitives)
# in place (F.threshold(x, ..., inplace=True)): PyTorch 2.13 masks by the input as it was
# before the write (zero where it was at or below the threshold, whatever the value written;
# the result cannot tell, a written value above the threshold looks like a kept one), so
# the input is saved (runtime/inplace.py keeps a clone of it)
_unary("threshold_", _threshold,
       lambda c, g: (zero_linked(c, g.masked_fill(c.self <= c.threshold, 0), c.self),),
       "ThresholdBackward1",
       save=("self",), float_out=False, decompose=_threshold_primitives)


# ---- logsigmoid, mish ----------------------------------------------------------------------

@_half_in_float
def _logsigmoid(x):
    # PyTorch's kernel: min(x, 0) - log1p(exp(-|x|))
    return (np.minimum(x, 0) - np.log1p(np.exp(-np.abs(x)))).astype(x.dtype, copy=False)


def _logsigmoid_primitives(node, emit):
    x = node.inputs[0]
    z = emit("exp", [emit("neg", [emit("abs", [x])])])
    return emit("sub", [emit("clamp_max", [x, 0]), emit("log1p", [z])], alpha=1)


_unary("logsigmoid", _logsigmoid, lambda c, g: (g * (-c.self).sigmoid(),),
       "LogSigmoidBackward0", cost=4, decompose=_logsigmoid_primitives)


@_half_in_float
def _mish(x):
    with np.errstate(over="ignore"):
        return (x * np.tanh(np.log1p(np.exp(x)))).astype(x.dtype, copy=False)


def _mish_vjp(c, g):
    x = c.self
    ts = x.exp().log1p().tanh()
    return (g * (ts + x * x.sigmoid() * (1 - ts * ts)),)


def _mish_primitives(node, emit):
    """x * tanh(log1p(exp(x))): the nodes _mish_vjp recomputes (shared with it by cse)."""
    x = node.inputs[0]
    return emit("mul", [x, emit("tanh", [emit("log1p", [emit("exp", [x])])])])


_unary("mish", _mish, _mish_vjp, "MishBackward0", cost=8, decompose=_mish_primitives)


# ---- glu -------------------------------------------------------------------------------------

def _halves(x, dim):
    h = x.shape[dim] // 2
    lo = [slice(None)] * x.ndim
    hi = [slice(None)] * x.ndim
    lo[dim], hi[dim] = slice(0, h), slice(h, 2 * h)
    return x[tuple(lo)], x[tuple(hi)]


_sigmoid = sigmoid_np.sigmoid


def _glu(x, dim):
    a, b = _halves(x, dim)
    return a * _sigmoid(b)


def _glu_vjp(c, g):
    x, d = c.self, c.dim
    h = x.shape[d] // 2
    a, b = x.narrow(d, 0, h), x.narrow(d, h, h)
    s = b.sigmoid()
    ga = g * s
    return (ga._op("cat", ga * a * (1 - s), dim=d),)


def _glu_primitives(node, emit):
    """a * sigmoid(b), a and b the halves of x along dim (two views, one fused loop)."""
    x, d = node.inputs[0], node.attrs["dim"]
    h = x.type.shape[d] // 2
    a = emit("slice", [x], dim=d, start=0, end=h, step=1)
    b = emit("slice", [x], dim=d, start=h, end=2 * h, step=1)
    return emit("mul", [a, emit("sigmoid", [b])])


defop("glu", _glu, vjp=_glu_vjp, grad_fn="GluBackward0", save=("self",), promote=(0,),
      float_out=True, cost=4, decompose=_glu_primitives)
