"""Elementwise math that PyTorch has as kernels of its own and llgrad writes as compositions
of the op table's ops: log2 / log10 / exp2, logaddexp(2), hypot, float_power, heaviside,
logit, rad2deg / deg2rad, nan_to_num, copysign / signbit, xlogy, sinc, fmax / fmin, positive
(fmod / remainder / floor_divide / rsub: functions_division.py; ldexp:
functions_numeric_more.py); their Tensor methods and in-place forms. Being compositions they
trace, compile, differentiate and vmap through their ops (no op, lowering or batching rule of
their own); the values are PyTorch's up to rounding where a docstring says the formula
differs from PyTorch's kernel.

Where a formula has a branch that is not taken (a where), the branch is fed safe inputs, so
that its gradient (multiplied by the zero the where sends it) is 0, not 0 * inf = nan."""
import math

from . import dtypes
from .creation import tensor as _tensor
from .dispatch import call
from .dispatch import scalar_type_name as tname
from .dtype_info import finfo
from .compose import _can_cast, attach, make_inplace  # noqa: F401 (used from here)
from .functions import _method_fn, where
from .math_operands import _in_double, as_type, float_type, floating, tensor_input
from .tensor import Tensor
from ..ir import OPS
from .nansum_grad import nan_to_num_grad
from .node_names import no_derivative_from, torch_node

_LN2, _LN10 = math.log(2.0), math.log(10.0)


# ---- logarithms and exponentials ------------------------------------------------------------

def _log_base(x, base, ln):
    x = floating(x)
    if x._dtype.is_complex:     # (PyTorch's complex kernel: log(z) / log(base))
        return x.log() / ln

    def f(d):
        r = d.log() / ln
        # exact powers of the base come out exact, as PyTorch's kernels give them (log(1000)
        # / log(10) is 2.9999999999999996): where base**round(r) == x the value is round(r),
        # the gradient still r's
        n = r.round()
        exact = r.isfinite() & ((base ** n) == d)
        return where(exact, r + (n - r).detach(), r)
    return _in_double(x, f)


@torch_node("Log2Backward0")
def log2(input):
    """As torch.log2 (log(x) / log(2), computed in float64)."""
    return _log_base(input, 2.0, _LN2)


@torch_node("Log10Backward0")
def log10(input):
    """As torch.log10 (log(x) / log(10), computed in float64)."""
    return _log_base(input, 10.0, _LN10)


@torch_node("Exp2Backward0")
def exp2(input):
    """As torch.exp2 (2 ** x, with x's layout: pow(number, x) is row-major)."""
    x = floating(input)
    return call(OPS["pow"], (_tensor(2.0, dtype=x._dtype), x), {})


def _logaddexp(name, input, other, exp, scale, nan_edge=True):
    rt = dtypes.result_type(input, other)
    if not rt.is_floating_point:
        raise NotImplementedError(f"\"{name}_cpu\" not implemented for '{tname(rt)}'")
    # (float16 and bfloat16 computed in float32 and rounded once, as PyTorch's kernel, on
    # the operands cast to the result's dtype first)
    a, b = as_type(input, rt), as_type(other, rt)
    if rt in (dtypes.float16, dtypes.bfloat16):
        a, b = a.float(), b.float()
    # PyTorch's formula: max + log1p(exp(-|a - b|)), and a itself where a == b is infinite
    same_inf = (a.abs() == math.inf) & (a == b)
    d = (a - b).masked_fill(same_inf, 0)
    t = exp(-d.abs()).log1p()
    out = call(OPS["maximum"], (a, b), {}) + (t if scale == 1 else t * scale)
    edge = a
    if nan_edge and (a.requires_grad or b.requires_grad):
        # (PyTorch's gradient there is nan, its formula's inf - inf: exp(-x * x) is 0 at
        # +-inf with a nan derivative. Not in logcumsumexp's scan: its partial sums pass it)
        sa, sb = a.masked_fill(~same_inf, 0), b.masked_fill(~same_inf, 0)
        edge = sa + (-(sa * sa)).exp() + (-(sb * sb)).exp()
    return as_type(where(same_inf, edge, out), rt)


@torch_node("LogaddexpBackward0")
def logaddexp(input, other):
    """As torch.logaddexp: log(exp(input) + exp(other)) without overflow."""
    return _logaddexp("logaddexp", input, other, lambda t: t.exp(), 1)


@torch_node("Logaddexp2Backward0")
def logaddexp2(input, other):
    """As torch.logaddexp2: log2(2**input + 2**other) without overflow."""
    return _logaddexp("logaddexp2", input, other, lambda t: 2.0 ** t, 1.0 / _LN2)


@torch_node("HypotBackward0")
def hypot(input, other):
    """As torch.hypot: sqrt(input**2 + other**2), without overflow (float32 in float64;
    float64 scaled by the larger magnitude)."""
    rt = dtypes.result_type(input, other)
    if not rt.is_floating_point:
        raise NotImplementedError(f"\"hypot_cpu\" not implemented for '{tname(rt)}'")
    a, b = as_type(input, rt), as_type(other, rt)
    inf = (a.abs() == math.inf) | (b.abs() == math.inf)     # (inf even with a nan, as C's)
    if rt is not dtypes.float64:
        a, b = a.double(), b.double()
        return where(inf, math.inf, (a * a + b * b).sqrt().to(rt))
    aa, bb = a.abs(), b.abs()
    hi, lo = call(OPS["maximum"], (aa, bb), {}), call(OPS["minimum"], (aa, bb), {})
    r = lo / hi.masked_fill(hi == 0, 1)
    return where(inf, math.inf, hi * (1 + r * r).sqrt())    # (where keeps a's layout)


def float_power(input, exponent):
    """As torch.float_power: input ** exponent in float64."""
    if isinstance(input, Tensor):
        e = exponent.double() if isinstance(exponent, Tensor) else exponent
        return input.double().pow(e)
    return call(OPS["pow"], (float(input), exponent.double()), {})


def _float_power_(self, exponent):
    if self._dtype is not dtypes.float64:
        raise RuntimeError(f"the base given to float_power_ has dtype {tname(self._dtype)} but "
                           "the operation's result requires dtype Double")
    return self.pow_(exponent.double() if isinstance(exponent, Tensor) else exponent)


_float_power_.__name__ = "float_power_"
_float_power_.__doc__ = "In-place float_power (self must be float64), as torch.Tensor.float_power_."


# ---- steps, logits, angles, non-finite values -------------------------------------------------

def heaviside(input, values):
    """As torch.heaviside: 0 where input < 0, values where input == 0, 1 where input > 0.
    Not differentiable: as PyTorch's, the result requires grad when an input does, and a
    backward through it raises."""
    if input._dtype is not values._dtype:
        raise RuntimeError("heaviside is not yet implemented for tensors with different dtypes.")
    x, v = input.detach(), values.detach()
    return no_derivative_from(where(x == 0, v, (x > 0).to(x._dtype)), (input, values),
                              "heaviside")


@torch_node("LogitBackward0")
def logit(input, eps=None):
    """As torch.logit: log(p / (1 - p)), p clamped to [eps, 1 - eps] when eps is given."""
    x = floating(input)
    if eps is not None:
        x = x.clamp(eps, 1 - eps)
    if not x.requires_grad:
        return (x / (1 - x)).log()
    # PyTorch's gradient, 1 / (x (1 - x)): log(x / (1 - x))'s chain gives a finite one
    # outside [0, 1] (PyTorch: nan) and 0 * inf = nan at 0 and 1 (PyTorch: inf). The values
    # stay log(x / (1 - x))'s; each branch sees 0.5 where another is taken, so that no
    # 0 * inf of a branch not taken reaches the gradient
    out, edge = (x < 0) | (x > 1), (x == 0) | (x == 1)
    xs, xe, xo = x.masked_fill(out | edge, 0.5), x.masked_fill(~edge, 0.5), \
        x.masked_fill(~out, 0.5)
    y = where(edge, xe.log() - (-xe).log1p(), (xs / (1 - xs)).log())
    return where(out, (xo * (1 - xo)).sqrt(), y)      # (nan, and a nan gradient)


@torch_node("Rad2DegBackward0")
def rad2deg(input):
    """As torch.rad2deg."""
    return input * (180.0 / math.pi)


@torch_node("Deg2RadBackward0")
def deg2rad(input):
    """As torch.deg2rad."""
    return input * (math.pi / 180.0)


def positive(input):
    """As torch.positive: input itself (a bool tensor raises, as PyTorch)."""
    if input._dtype is dtypes.bool_:
        raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
    return input


@torch_node("NanToNumBackward0")
def nan_to_num(input, nan=0.0, posinf=None, neginf=None):
    """As torch.nan_to_num: nan, +inf and -inf replaced (by default with 0 and the dtype's
    largest and lowest values); integer tensors are returned as a copy."""
    if not input._dtype.is_floating_point:
        return input.clone()
    fi = finfo(input._dtype)

    def fill(x):    # (by where, which keeps x's layout as PyTorch's kernel does; masked_fill not)
        out = where(x.isnan(), nan, x)
        out = where(x == math.inf, fi.max if posinf is None else posinf, out)
        return where(x == -math.inf, fi.min if neginf is None else neginf, out)
    return nan_to_num_grad(input, fill)     # (the gradient grad * isfinite(input), as PyTorch's)


def signbit(input):
    """As torch.signbit: whether the sign bit is set (-0.0 included; the sign bit of a nan
    is not read: a nan counts as positive)."""
    if input._dtype is dtypes.bool_:
        return input != input
    if not input._dtype.is_floating_point:
        return input < 0
    return (input < 0) | ((input == 0) & (input.reciprocal() < 0))


@torch_node(lambda input, other, *a, **k: "CopysignBackward0" if isinstance(other, Tensor) else "CopysignBackward1")
def copysign(input, other):
    """As torch.copysign: |input| with the sign of other (-0.0 counts as negative; a nan's
    sign bit is not read: a nan counts as positive)."""
    tensor_input("copysign", input, other)
    rt = float_type(input, other)
    mag = as_type(input, rt).abs()
    if isinstance(other, Tensor):   # (other's gradient is zeros, as PyTorch's, not None)
        r = where(signbit(other), -mag, mag)
        return r - other.masked_fill(other.isnan() | True, 0) if other.requires_grad else r
    return -mag if math.copysign(1.0, other) < 0 else mag


@torch_node(lambda input, other: ("XlogyBackward0" if isinstance(other, Tensor) else "XlogyBackward2") if isinstance(input, Tensor) else "XlogyBackward1")
def xlogy(input, other):
    """As torch.xlogy: input * log(other), +0 where input == 0 (unless other is nan), with
    PyTorch's gradients (ops_special.py)."""
    rt = float_type(input, other)
    return call(OPS["xlogy_float"], (as_type(input, rt), as_type(other, rt)), {})


@torch_node("SincBackward0")
def sinc(input):
    """As torch.sinc: sin(pi x) / (pi x), 1 at 0 (float16 in float32, as PyTorch)."""
    x = floating(input)
    if x._dtype in (dtypes.float16, dtypes.bfloat16):       # (one rounding, not one an op)
        return sinc(x.float()).to(x._dtype)
    # (1 where pi x^2 underflows to 0 too, as PyTorch's backward masks: the quotient's
    # gradient is inf - inf there)
    zero = x * x * math.pi == 0
    px = x.masked_fill(zero, 1) * math.pi
    return where(zero, 1.0, px.sin() / px)     # (masked_fill's result is row-major)


def _fmax_fmin(input, other, pick):
    b = as_type(other, dtypes.result_type(input, other))
    # PyTorch's gradient goes to input on ties, so a where rather than maximum / minimum
    take = pick(input, b)
    if b._dtype.is_floating_point:
        take = take | b.isnan()
    return where(take, input, b)


@torch_node("FmaxBackward0")
def fmax(input, other):
    """As torch.fmax: the elementwise maximum, a nan ignored when the other is a number."""
    return _fmax_fmin(input, other, lambda a, b: a >= b)


@torch_node("FminBackward0")
def fmin(input, other):
    """As torch.fmin: the elementwise minimum, a nan ignored when the other is a number."""
    return _fmax_fmin(input, other, lambda a, b: a <= b)


for _f, _aliases, _inp in (
        (log2, (), "log2_"), (log10, (), "log10_"), (exp2, (), "exp2_"),
        (logaddexp, (), None), (logaddexp2, (), None), (hypot, (), "hypot_"),
        (float_power, (), None), (heaviside, (), "heaviside_"), (logit, (), "logit_"),
        (rad2deg, (), "rad2deg_"), (deg2rad, (), "deg2rad_"), (positive, (), None),
        (nan_to_num, (), "nan_to_num_"), (signbit, (), None), (copysign, (), "copysign_"),
        (xlogy, (), "xlogy_"), (sinc, (), "sinc_"), (fmax, (), None), (fmin, (), None)):
    attach(_f, *_aliases, inplace_name=_inp)
Tensor.float_power_ = _float_power_
Tensor.square_ = make_inplace(lambda self: self.square(), "square_")


# PyTorch's torch.<name>_ functions of in-place methods (these and older ones)
for _n in ("log2_", "log10_", "exp2_", "logit_", "rad2deg_", "deg2rad_", "nan_to_num_",
           "xlogy_", "sinc_", "ldexp_", "abs_", "ceil_", "cos_", "erf_", "exp_", "expm1_",
           "fix_", "floor_", "frac_", "log_", "log1p_", "neg_", "negative_", "reciprocal_",
           "relu_", "round_", "rsqrt_", "sigmoid_", "sin_", "sqrt_", "square_", "tanh_",
           "trunc_", "zero_", "fill_", "detach_"):
    _method_fn(_n)
