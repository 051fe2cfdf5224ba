"""Elementwise ops: arithmetic, unary math, activations, comparisons, casts and fills."""
import math

import numpy as np

from . import libm_np, sigmoid_np
from .erf_table import np_erf
from .fused_madd import fused_alpha
from .optable import conj, defop

_SQRT2 = math.sqrt(2.0)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def _is_tensor(x):
    return hasattr(x, "_dtype")


def _binary(name, impl, vjp, grad_fn, save=(), float_out=False, number_edges=True, **kw):
    # (PyTorch wraps a Python number operand of these into a tensor: a (None, 0) edge)
    return defop(name, impl, vjp=vjp, grad_fn=grad_fn, args=("self", "other"), save=save,
                 kind="elementwise", promote=(0, 1), float_out=float_out,
                 number_edges=number_edges, **kw)


def _unary(name, impl, vjp, grad_fn, save=(), float_out=True, **kw):
    return defop(name, impl, vjp=vjp, grad_fn=grad_fn, save=save, kind="elementwise",
                 promote=(0,), float_out=float_out, **kw)


# ---- arithmetic -----------------------------------------------------------------------

def _is_bool(v):
    return isinstance(v, (bool, np.bool_)) or getattr(v, "dtype", None) == np.bool_


def _times(x, alpha, other=None):
    """alpha * x for add/sub's alpha: a Python number times a Python number stays one (a
    weak scalar: NumPy's np.multiply(1, 2) is an int64 that would widen float32 to float64);
    bools add with alpha cast to bool, as PyTorch's (add(b, b, alpha=2) is b | b)."""
    if alpha == 1:
        return x
    if _is_bool(x) and _is_bool(other):
        alpha = bool(alpha)
        if isinstance(x, (bool, np.bool_)):
            return bool(x) and alpha
    return x * alpha if isinstance(x, (bool, int, float)) else np.multiply(x, alpha)


def _half_in_float(fn):
    """fn computed in float32 for a float16 x and rounded once, as PyTorch's CPU kernels
    compute float16 (a composition in float16 rounds at each step)."""
    def impl(x, *args, **kwargs):
        if getattr(x, "dtype", None) == np.float16:
            return fn(x.astype(np.float32), *args, **kwargs).astype(np.float16)
        return fn(x, *args, **kwargs)
    return impl


def _half_scalars(fn):
    """mul / div of a float16 array by a Python number (or a 0-d array of another dtype):
    PyTorch keeps the number in float32
    (its opmath type) and rounds once, where NumPy rounds the number to float16 first. (An
    operand of float32 or float64 never makes float16: those calls skip np.result_type.)"""
    def impl(a, b):
        if type(b) is np.ndarray and not b.ndim and b.dtype != np.float16 and \
                getattr(a, "dtype", None) == np.float16:
            b = b.item()        # (a 0-d tensor left uncast: shape_rules.keeps_number)
        if (type(a) in _NUMBER or type(b) in _NUMBER) and getattr(
                b if type(a) in _NUMBER else a, "dtype", None) not in _WIDE_FLOATS and \
                np.result_type(a, b) == np.float16:
            return fn(*(x.astype(np.float32) if isinstance(x, np.ndarray) else x
                        for x in (a, b))).astype(np.float16)
        return fn(a, b)
    return impl


def _half_alpha(fn):
    """add / sub of float16 with an alpha: PyTorch rounds alpha (and a number operand) to
    float16, then computes in float32 and rounds once (NumPy rounds b * alpha first)."""
    def impl(a, b, alpha=1):
        if alpha != 1 and np.result_type(a, b) == np.float16:
            a, b = (x.astype(np.float32) if isinstance(x, np.ndarray) else float(np.float16(x))
                    for x in (a, b))
            return fn(a, b, alpha=float(np.float16(alpha))).astype(np.float16)
        return fn(a, b, alpha=alpha)
    return impl


def _add(a, b, alpha=1):
    if alpha == 1:          # (the common call: what fused_alpha and _times leave it as)
        return np.add(a, b)
    r = fused_alpha(a, b, alpha)
    return np.add(a, _times(b, alpha, a)) if r is None else r


def _sub(a, b, alpha=1):
    if alpha == 1:
        return np.subtract(a, b)
    r = fused_alpha(a, b, -alpha)
    return np.subtract(a, _times(b, alpha)) if r is None else r


_NUMBER = (int, float)
_WIDE_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))    # (_half_scalars)
_binary("add", _half_alpha(_add),
        lambda c, g: (g, g if c.alpha == 1 else g * conj(c.alpha)), "AddBackward0", functions=("add",), complex=True)
_binary("sub", _half_alpha(_sub),
        lambda c, g: (g, -g if c.alpha == 1 else g * -conj(c.alpha)), "SubBackward0",
        functions=("sub", "subtract"), complex=True)
_binary("rsub", _half_alpha(lambda a, b, alpha=1: _sub(b, a, alpha)),
        lambda c, g: (-g if c.alpha == 1 else g * -conj(c.alpha), g),
        lambda ins, at: "RsubBackward0" if hasattr(ins[1], "_dtype") else "RsubBackward1",
        number_edges=False, complex=True)
_binary("mul", _half_scalars(np.multiply),
        lambda c, g: (g * conj(c.other) if c.needs(0) else None,
                      g * conj(c.self) if c.needs(1) else None),
        "MulBackward0", save=("self", "other"),
        methods=("mul", "multiply", "__mul__", "__rmul__"), inplace=("mul_", "__imul__"),
        functions=("mul", "multiply"), complex=True)
_binary("div", _half_scalars(np.true_divide),
        lambda c, g: (g / conj(c.other) if c.needs(0) else None,
                      -g * conj(c.self / c.other / c.other) if c.needs(1) else None),
        "DivBackward0", save=("self", "other"), float_out=True,
        functions=("div", "divide", "true_divide"), complex=True)



def _div_mode(a, b, rounding_mode=None):
    if rounding_mode == "floor":
        # Python's (and PyTorch's) floor division, (a - fmod(a, b)) / b corrected: not
        # floor(a / b), which rounds first (5e-324 // -2.0 is -1; inf // 3 is nan)
        return np.floor_divide(a, b)
    q = np.true_divide(a, b)
    if rounding_mode == "trunc":
        return np.trunc(q)
    return q


def _div_mode_vjp(c, g):
    if c.rounding_mode is not None:     # a step function: grad * 0, as PyTorch (nan stays nan)
        return (g * 0 if c.needs(0) else None, g * 0 if c.needs(1) else None)
    return (g / c.other if c.needs(0) else None,
            -g * (c.self / c.other / c.other) if c.needs(1) else None)


# div(other, rounding_mode=...) on floats: PyTorch's div.Tensor_mode, one node (DivBackward2)
# whatever the mode (rounding_mode=None given explicitly included). Integer operands keep
# their integer floor/trunc division in the method (llgrad/runtime/methods.py).
_binary("div_mode", _div_mode, _div_mode_vjp, "DivBackward2", save=("self", "other"),
        float_out=True)

# div by a Python number inside a composite (PyTorch's div.Scalar, as cross_entropy's mean
# over the batch calls it): one edge, DivBackward1. Python's x / 2 is div.Tensor instead.
defop("div_scalar", np.true_divide, args=("self", "other"), save=("other",),
      vjp=lambda c, g: (g / c.other,), grad_fn="DivBackward1", kind="elementwise",
      promote=(0, 1), float_out=True)


def _neg(x):
    if x.dtype == np.bool_:
        raise RuntimeError("Negation, the `-` operator, on a bool tensor is not supported. If "
                           "you are trying to invert a mask, use the `~` or `logical_not()` "
                           "operator instead.")
    return np.negative(x)


_unary("neg", _neg, lambda c, g: (-g,), "NegBackward0", float_out=False,
       methods=("neg", "negative", "__neg__"), inplace=("neg_", "negative_"),
       functions=("neg", "negative"), complex=True)

# ---- unary math -----------------------------------------------------------------------

_unary("exp", lambda x, libm=False: libm_np.libm("exp", x) if libm else np.exp(x),  # (math.exp's)
       lambda c, g: (g * conj(c.result),), "ExpBackward0", save=("result",),
       methods=("exp",), inplace=("exp_",), functions=("exp",), cost=4, complex=True)
_unary("log", np.log, lambda c, g: (g / conj(c.self),), "LogBackward0", save=("self",),
       methods=("log",), inplace=("log_",), functions=("log",), cost=4, complex=True)
_unary("log1p", np.log1p, lambda c, g: (g / conj(c.self + 1),), "Log1PBackward0",
       save=("self",), methods=("log1p",), inplace=("log1p_",), functions=("log1p",), cost=4,
       eager_native=True, complex=True)
_unary("expm1", np.expm1, lambda c, g: (g * conj(c.result + 1),), "Expm1Backward0", save=("result",),
       methods=("expm1",), inplace=("expm1_",), functions=("expm1",), cost=4, complex=True)
_unary("sqrt", np.sqrt, lambda c, g: (g / (2 * conj(c.result)),), "SqrtBackward0", save=("result",),
       methods=("sqrt",), inplace=("sqrt_",), functions=("sqrt",), complex=True)
_unary("rsqrt", lambda x: 1.0 / np.sqrt(x), lambda c, g: (g * -0.5 * conj(c.result ** 3),),
       "RsqrtBackward0", save=("result",),
       methods=("rsqrt",), inplace=("rsqrt_",), functions=("rsqrt",), complex=True)
_unary("reciprocal", np.reciprocal, lambda c, g: (-g * conj(c.result * c.result),),
       "ReciprocalBackward0", save=("result",),
       methods=("reciprocal",), inplace=("reciprocal_",), functions=("reciprocal",), complex=True)
def _abs(x):
    if x.dtype == np.bool_:
        raise NotImplementedError('"abs_cpu" not implemented for \'Bool\'')
    return np.abs(x)


def _sign(x):
    if x.dtype == np.bool_:         # (PyTorch: a bool tensor is its own sign)
        return np.array(x, copy=True)
    return np.where(x != x, 0, np.sign(x))      # (PyTorch: sign(NaN) is 0)


def _abs_vjp(c, g):
    x = c.self          # (a complex x's sign is z / |z|, which has a derivative: sgn)
    return (g * (x.sgn() if x.dtype.is_complex else x.sign()),)


_unary("abs", _abs, _abs_vjp, "AbsBackward0", save=("self",), float_out=False,
       methods=("abs", "absolute", "__abs__"), inplace=("abs_", "absolute_"),
       functions=("abs", "absolute"), complex=True)
_unary("sign", _sign,
       lambda c, g: (g.new_zeros(g.shape),), "SignBackward0", float_out=False,
       methods=("sign",), inplace=("sign_",), functions=("sign",))   # (complex: sgn)
_unary("sin", np.sin, lambda c, g: (g * conj(c.self.cos()),), "SinBackward0", save=("self",),
       methods=("sin",), inplace=("sin_",), functions=("sin",), cost=4, complex=True)
_unary("cos", lambda x, libm=False: np.cos(x),   # (libm: math.cos's; NumPy's f64 is glibc's)
       lambda c, g: (-g * conj(c.self.sin()),), "CosBackward0", save=("self",),
       methods=("cos",), inplace=("cos_",), functions=("cos",), cost=4, complex=True)
_unary("tanh", np.tanh, lambda c, g: (g * conj(1 - c.result * c.result),), "TanhBackward0",
       save=("result",), methods=("tanh",), inplace=("tanh_",), functions=("tanh",), cost=4, complex=True)
_unary("erf", np_erf, lambda c, g: (g * _TWO_OVER_SQRT_PI * (-(c.self * c.self)).exp(),),
       "ErfBackward0", save=("self",),
       methods=("erf",), inplace=("erf_",), functions=("erf",), cost=4,
       eager_native=True)


_sigmoid = _half_in_float(sigmoid_np.sigmoid)


_unary("sigmoid", _sigmoid, lambda c, g: (g * conj(c.result) * conj(1 - c.result),),
       "SigmoidBackward0", save=("result",),
       methods=("sigmoid",), inplace=("sigmoid_",), functions=("sigmoid",), cost=4,
       eager_native=True, complex=True)

# ---- activations ----------------------------------------------------------------------

def zero_linked(c, out, saved):
    """out, the gradient a rule computed from saved (the op's input or result) only through a
    mask: PyTorch computes it with an op of its own (threshold_backward, hardtanh_backward,
    ...) whose derivative in saved is zero, so under create_graph it requires grad through
    saved and a second derivative reaches the op's input as zeros, where without the link
    it would find the input unused. out - (+0) is out bit for bit (the +0 from saved's
    sign's magnitude: sign(NaN) is 0, sign(+-inf) +-1, so |sign(saved)| * 0 is +0
    everywhere and a NaN or inf in saved leaves out as it is)."""
    if getattr(c, "building_graph", False) and saved.requires_grad:
        return out - saved.sign().abs() * 0
    return out


def _relu(x):
    # (x second: a tie keeps it, relu(-0) = -0; NumPy's float16 maximum keeps the first)
    return np.maximum(0, x) if x.dtype != np.float16 else np.where(x < 0, x.dtype.type(0), x)


_unary("relu", _relu,
       lambda c, g: (zero_linked(c, g.masked_fill(c.result <= 0, 0), c.result),),  # (1 at NaN)
       "ReluBackward0", save=("result",), float_out=False,
       methods=("relu",), inplace=("relu_",), functions=("relu",), eager_native=True)
_unary("leaky_relu",
       _half_in_float(lambda x, negative_slope=0.01: np.where(x > 0, x, x * negative_slope)),
       lambda c, g: (zero_linked(c, g.where(c.self > 0, g * c.negative_slope), c.self),),
       "LeakyReluBackward0",
       save=("self",),
       eager_native=True)


def _leaky_relu_inplace_vjp(c, g):
    # leaky_relu_ saves its result, not its input: result > 0 says x > 0 only for a
    # non-negative slope, so PyTorch refuses a negative one in backward
    if c.negative_slope < 0:
        raise RuntimeError("In-place leakyReLu backward calculation is triggered with a "
                           "negative slope which is not supported. This is caused by calling "
                           "in-place forward function with a negative slope, please call "
                           "out-of-place version instead. File an issue at "
                           "https://github.com/pytorch/pytorch if you do require supporting "
                           "in-place leakRelu backward calculation with negative slope")
    return (zero_linked(c, g.where(c.result > 0, g * c.negative_slope), c.result),)


# in place (F.leaky_relu(x, inplace=True)): PyTorch's leaky_relu_ has a derivative of its
# own, on the result (LeakyReluBackward1)
_unary("leaky_relu_", lambda x, negative_slope=0.01: np.where(x > 0, x, x * negative_slope),
       _leaky_relu_inplace_vjp, "LeakyReluBackward1", save=("result",), eager_native=True)


@_half_in_float
def _gelu(x, approximate="none"):
    if approximate == "tanh":
        inner = _SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)
        return 0.5 * x * (1 + np.tanh(inner))
    return 0.5 * x * (1 + np_erf(x / _SQRT2))


def _gelu_vjp(c, g):
    x = c.self
    if x.element_size() == 2:   # (float16 in float32, rounded once: x^3 overflows past 40)
        return (_gelu_vjp(_Float32Saved(c), g.float())[0].to(x.dtype),)
    if c.approximate == "tanh":
        x2 = x * x
        t = (_SQRT_2_OVER_PI * (x + 0.044715 * x2 * x)).tanh()
        d = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * _SQRT_2_OVER_PI * (1 + 3 * 0.044715 * x2)
    else:
        cdf = 0.5 * (1 + (x * (1 / _SQRT2)).erf())
        d = cdf + x * (x * x * -0.5).exp() * _INV_SQRT_2PI
    return (g * d,)


class _Float32Saved:
    """A VJP context read through with its saved input in float32."""

    def __init__(self, c):
        self.self, self.approximate = c.self.float(), c.approximate


def _gelu_primitives(node, emit):
    """x * cdf(x), with cdf as _gelu_vjp computes it (the same nodes: ir/decompose.py)."""
    x = node.inputs[0]
    if node.attrs.get("approximate", "none") == "tanh":
        x2 = emit("mul", [x, x])
        inner = emit("add", [x, emit("mul", [emit("mul", [x2, 0.044715]), x])], alpha=1)
        t = emit("tanh", [emit("mul", [inner, _SQRT_2_OVER_PI])])
        cdf = emit("mul", [emit("add", [t, 1], alpha=1), 0.5])
    else:
        erf = emit("erf", [emit("mul", [x, 1 / _SQRT2])])
        cdf = emit("mul", [emit("add", [erf, 1], alpha=1), 0.5])
    return emit("mul", [x, cdf])


# recompute=False: its result is saved, as eager holds it, and the backward's erf runs once
_unary("gelu", _gelu, _gelu_vjp, "GeluBackward0", save=("self",),
       cost=4, decompose=_gelu_primitives,
       eager_native=True, recompute=False)


def _silu_vjp(c, g):
    s = c.self.sigmoid()
    return (g * s * (1 + c.self * (1 - s)),)


_unary("silu", _half_in_float(lambda x: x * _sigmoid(x)), _silu_vjp, "SiluBackward0", save=("self",),
       methods=("silu",), cost=4,
       eager_native=True)


def _softplus(x, beta=1, threshold=20):
    bx = x * beta
    return np.where(bx > threshold, x, np.logaddexp(0, bx) / beta).astype(x.dtype, copy=False)


_unary("softplus", _softplus,
       lambda c, g: (g.where(c.self * c.beta > c.threshold, g * (c.self * c.beta).sigmoid()),),
       "SoftplusBackward0", save=("self",), cost=4,
       eager_native=True)


# ---- comparisons and logic (no gradient) ----------------------------------------------
# (the operators & | ^ ~ are llgrad/runtime/functions_bitwise.py's: logical on bools, bitwise
# on integers)

def _compare(fn):
    """fn, raising OverflowError (as NumPy's arithmetic does) for a Python int outside an
    integer operand's dtype: the dispatcher then wraps the number into that dtype, as
    PyTorch does (uint8 tensor > -1 compares with 255)."""
    def impl(a, b):
        for x, n in ((a, b), (b, a)):
            if type(n) is int and getattr(x, "dtype", None) is not None and x.dtype.kind in "iu":
                info = np.iinfo(x.dtype)
                if not info.min <= n <= info.max:
                    raise OverflowError(f"Python integer {n} out of bounds for {x.dtype}")
        return fn(a, b)
    return impl


for _name, _fn, _alias in (("eq", np.equal, ()), ("ne", np.not_equal, ()),
                           ("lt", np.less, ("less",)), ("le", np.less_equal, ()),
                           ("gt", np.greater, ("greater",)), ("ge", np.greater_equal, ())):
    defop(_name, _compare(_fn), args=("self", "other"), kind="elementwise", promote=(0, 1),
          methods=(_name, f"__{_name}__") + _alias, functions=(_name,) + _alias,
          complex=_name in ("eq", "ne"))
defop("logical_and", np.logical_and, args=("self", "other"), kind="elementwise", promote=(0, 1),
      methods=("logical_and",), functions=("logical_and",))
defop("logical_or", np.logical_or, args=("self", "other"), kind="elementwise", promote=(0, 1),
      methods=("logical_or",), functions=("logical_or",))
defop("logical_xor", np.logical_xor, args=("self", "other"), kind="elementwise", promote=(0, 1),
      methods=("logical_xor",), functions=("logical_xor",))
defop("logical_not", np.logical_not, kind="elementwise",
      methods=("logical_not",), inplace=("logical_not_",), functions=("logical_not",), complex=True)
defop("isnan", np.isnan, kind="elementwise",
      methods=("isnan",), inplace=("isnan_",), functions=("isnan",), complex=True)
defop("isfinite", np.isfinite, kind="elementwise",
      methods=("isfinite",), inplace=("isfinite_",), functions=("isfinite",), complex=True)
defop("floor", np.floor, kind="elementwise", vjp=lambda c, g: (g.new_zeros(g.shape),),
      grad_fn="FloorBackward0", methods=("floor",), inplace=("floor_",), functions=("floor",))
defop("round", np.round, kind="elementwise", vjp=lambda c, g: (g.new_zeros(g.shape),),
      grad_fn="RoundBackward0", methods=("round",), inplace=("round_",), functions=("round",))
