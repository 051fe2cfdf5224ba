"""Elementwise ops: arithmetic, unary math, activations, comparisons, casts and fills."""
import math

import numpy as np

from .optable import defop

_SQRT2 = math.sqrt(2.0)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_erf_scalar = np.frompyfunc(math.erf, 1, 1)
_erf_vector = None          # SciPy's vectorised erf, imported on first use (not at import:
                            # scipy.special alone takes ~0.4 s to import)


def _erf_impl():
    global _erf_vector
    if _erf_vector is None:
        try:
            from scipy.special import erf
            _erf_vector = erf
        except ImportError:     # pragma: no cover - depends on the environment
            _erf_vector = _erf_scalar
    return _erf_vector


def np_erf(x):
    # NumPy has no erf; SciPy's or math.erf (element by element) are exact to double
    # precision.
    dt = np.result_type(x, np.float32)
    return np.asarray(_erf_impl()(x), dtype=dt)


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

_binary("add", lambda a, b, alpha=1: np.add(a, b if alpha == 1 else np.multiply(b, alpha)),
        lambda c, g: (g, g if c.alpha == 1 else g * c.alpha), "AddBackward0", functions=("add",))
_binary("sub", lambda a, b, alpha=1: np.subtract(a, b if alpha == 1 else np.multiply(b, alpha)),
        lambda c, g: (g, -g if c.alpha == 1 else g * -c.alpha), "SubBackward0",
        functions=("sub", "subtract"))
_binary("rsub", lambda a, b, alpha=1: np.subtract(b, a if alpha == 1 else np.multiply(a, alpha)),
        lambda c, g: (-g if c.alpha == 1 else g * -c.alpha, g), "RsubBackward1",
        number_edges=False)
_binary("mul", np.multiply,
        lambda c, g: (g * c.other if c.needs(0) else None, g * c.self if c.needs(1) else None),
        "MulBackward0", save=("self", "other"),
        methods=("mul", "multiply", "__mul__", "__rmul__"), inplace=("mul_", "__imul__"),
        functions=("mul", "multiply"))
_binary("div", np.true_divide,
        lambda c, g: (g / c.other if c.needs(0) else None,
                      -g * c.self / (c.other * c.other) if c.needs(1) else None),
        "DivBackward0", save=("self", "other"), float_out=True,
        functions=("div", "divide", "true_divide"))



def _div_mode(a, b, rounding_mode=None):
    q = np.true_divide(a, b)
    if rounding_mode == "floor":
        return np.floor(q)
    if rounding_mode == "trunc":
        return np.trunc(q)
    return q


def _div_mode_vjp(c, g):
    if c.rounding_mode is not None:     # a step function: grad * 0, as PyTorch (nan stays nan)
        return (g * 0 if c.needs(0) else None, g * 0 if c.needs(1) else None)
    return (g / c.other if c.needs(0) else None,
            -g * c.self / (c.other * c.other) if c.needs(1) else None)


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


def _pow_name(inputs, attrs):
    a, b = inputs
    if not _is_tensor(b):
        return "PowBackward0"
    return "PowBackward1" if _is_tensor(a) else "PowBackward2"


def _pow_vjp(c, g):
    x, e = c.self, c.exponent
    gx = ge = None
    if c.needs(0):
        if not _is_tensor(e) and e == 0:
            gx = g.new_zeros(g.shape)
        else:
            gx = g * e * x ** (e - 1)
            if _is_tensor(e):
                gx = gx.masked_fill(e == 0, 0)     # x**0 is constant, even at x == 0
    if c.needs(1):
        r = c.result
        if _is_tensor(x):
            # 0 where x == 0 and e >= 0; log(1) there keeps -inf (and 0 * -inf = nan) out of
            # the graph, so double backward stays finite
            zero = (x == 0) & (e >= 0)
            ge = (g * r * x.masked_fill(zero, 1).log()).masked_fill(zero, 0)
        else:
            # d(a**e)/de = a**e * log(a); 0 at a == 0 (PyTorch's convention), nan below 0
            ge = g * r * (math.log(x) if x > 0 else math.nan) if x != 0 else g.new_zeros(g.shape)
    return gx, ge


def _pow(x, e):
    # x ** 0.5 is sqrt(x), as in PyTorch (sqrt(-0) = -0, sqrt(-inf) = nan): NumPy before 2.3
    # called C's pow there, which says +0 and +inf
    if type(e) is float and e == 0.5 and getattr(x, "dtype", None) is not None \
            and x.dtype.kind == "f":
        return np.sqrt(x)
    return np.power(x, e)


defop("pow", _pow, vjp=_pow_vjp, grad_fn=_pow_name, args=("self", "exponent"),
      save=("self", "exponent", "result"), kind="elementwise", promote=(0, 1),
      functions=("pow", "square"), cost=4)
_unary("neg", np.negative, lambda c, g: (-g,), "NegBackward0", float_out=False,
       methods=("neg", "negative", "__neg__"), inplace=("neg_", "negative_"),
       functions=("neg", "negative"))

# ---- unary math -----------------------------------------------------------------------

_unary("exp", np.exp, lambda c, g: (g * c.result,), "ExpBackward0", save=("result",),
       methods=("exp",), inplace=("exp_",), functions=("exp",), cost=4)
_unary("log", np.log, lambda c, g: (g / c.self,), "LogBackward0", save=("self",),
       methods=("log",), inplace=("log_",), functions=("log",), cost=4)
_unary("log1p", np.log1p, lambda c, g: (g / (c.self + 1),), "Log1PBackward0", save=("self",),
       methods=("log1p",), inplace=("log1p_",), functions=("log1p",), cost=4)
_unary("expm1", np.expm1, lambda c, g: (g * (c.result + 1),), "Expm1Backward0",
       save=("result",), methods=("expm1",), inplace=("expm1_",), functions=("expm1",), cost=4)
_unary("sqrt", np.sqrt, lambda c, g: (g / (2 * c.result),), "SqrtBackward0", save=("result",),
       methods=("sqrt",), inplace=("sqrt_",), functions=("sqrt",))
_unary("rsqrt", lambda x: 1.0 / np.sqrt(x), lambda c, g: (g * -0.5 * c.result ** 3,),
       "RsqrtBackward0", save=("result",),
       methods=("rsqrt",), inplace=("rsqrt_",), functions=("rsqrt",))
_unary("reciprocal", np.reciprocal, lambda c, g: (-g * c.result * c.result,),
       "ReciprocalBackward0", save=("result",),
       methods=("reciprocal",), inplace=("reciprocal_",), functions=("reciprocal",))
_unary("abs", np.abs, lambda c, g: (g * c.self.sign(),), "AbsBackward0", save=("self",),
       float_out=False,
       methods=("abs", "absolute", "__abs__"), inplace=("abs_", "absolute_"),
       functions=("abs", "absolute"))
_unary("sign", np.sign, lambda c, g: (g.new_zeros(g.shape),), "SignBackward0", float_out=False,
       methods=("sign",), inplace=("sign_",), functions=("sign",))
_unary("sin", np.sin, lambda c, g: (g * c.self.cos(),), "SinBackward0", save=("self",),
       methods=("sin",), inplace=("sin_",), functions=("sin",), cost=4)
_unary("cos", np.cos, lambda c, g: (-g * c.self.sin(),), "CosBackward0", save=("self",),
       methods=("cos",), inplace=("cos_",), functions=("cos",), cost=4)
_unary("tanh", np.tanh, lambda c, g: (g * (1 - c.result * c.result),), "TanhBackward0",
       save=("result",), methods=("tanh",), inplace=("tanh_",), functions=("tanh",), cost=4)
_unary("erf", np_erf, lambda c, g: (g * _TWO_OVER_SQRT_PI * (-(c.self * c.self)).exp(),),
       "ErfBackward0", save=("self",),
       methods=("erf",), inplace=("erf_",), functions=("erf",), cost=4)


def _sigmoid(x):
    # exp(-|x|) never overflows; both branches are exact.
    z = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + z), z / (1 + z)).astype(np.result_type(x), copy=False)


_unary("sigmoid", _sigmoid, lambda c, g: (g * c.result * (1 - c.result),), "SigmoidBackward0",
       save=("result",),
       methods=("sigmoid",), inplace=("sigmoid_",), functions=("sigmoid",), cost=4)

# ---- activations ----------------------------------------------------------------------

_unary("relu", lambda x: np.maximum(x, 0), lambda c, g: (g * (c.result > 0),),
       "ReluBackward0", save=("result",), float_out=False,
       methods=("relu",), inplace=("relu_",), functions=("relu",))
_unary("leaky_relu", lambda x, negative_slope=0.01: np.where(x > 0, x, x * negative_slope),
       lambda c, g: (g.where(c.self > 0, g * c.negative_slope),), "LeakyReluBackward0",
       save=("self",))


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
    return (g.where(c.result > 0, g * c.negative_slope),)


# in place (F.leaky_relu(x, inplace=True)): PyTorch's leaky_relu_ has a derivative of its
# own, on the result (LeakyReluBackward1)
_unary("leaky_relu_", lambda x, negative_slope=0.01: np.where(x > 0, x, x * negative_slope),
       _leaky_relu_inplace_vjp, "LeakyReluBackward1", save=("result",))


def _gelu(x, approximate="none"):
    if approximate == "tanh":
        inner = _SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)
        return 0.5 * x * (1 + np.tanh(inner))
    return 0.5 * x * (1 + np_erf(x / _SQRT2))


def _gelu_vjp(c, g):
    x = c.self
    if c.approximate == "tanh":
        x2 = x * x
        t = (_SQRT_2_OVER_PI * (x + 0.044715 * x2 * x)).tanh()
        d = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * _SQRT_2_OVER_PI * (1 + 3 * 0.044715 * x2)
    else:
        cdf = 0.5 * (1 + (x * (1 / _SQRT2)).erf())
        d = cdf + x * (x * x * -0.5).exp() * _INV_SQRT_2PI
    return (g * d,)


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


_unary("gelu", _gelu, _gelu_vjp, "GeluBackward0", save=("self",),
       cost=4, decompose=_gelu_primitives)


def _silu_vjp(c, g):
    s = c.self.sigmoid()
    return (g * s * (1 + c.self * (1 - s)),)


_unary("silu", lambda x: x * _sigmoid(x), _silu_vjp, "SiluBackward0", save=("self",),
       methods=("silu",), cost=4)


def _softplus(x, beta=1, threshold=20):
    bx = x * beta
    return np.where(bx > threshold, x, np.logaddexp(0, bx) / beta).astype(x.dtype, copy=False)


_unary("softplus", _softplus,
       lambda c, g: (g.where(c.self * c.beta > c.threshold, g * (c.self * c.beta).sigmoid()),),
       "SoftplusBackward0", save=("self",), cost=4)


def _clamp(x, lo, hi):
    if lo is not None:
        x = np.maximum(x, lo)
    if hi is not None:
        x = np.minimum(x, hi)
    return np.array(x, copy=True) if isinstance(x, np.ndarray) else x


def _clamp_vjp(c, g):
    x, lo, hi = c.self, c.min, c.max
    mask = None
    if lo is not None:
        mask = x >= lo
    if hi is not None:
        mask = (x <= hi) if mask is None else mask & (x <= hi)
    gx = g * mask if c.needs(0) and mask is not None else (g if c.needs(0) else None)
    # result = min(max(x, lo), hi): when lo > hi, hi wins everywhere (PyTorch's order)
    glo = None
    if c.needs(1):
        glo = g * ((x < lo) & (hi >= lo) if hi is not None else x < lo)
    ghi = g * ((x.maximum(lo) if lo is not None else x) > hi) if c.needs(2) else None
    return gx, glo, ghi


defop("clamp", _clamp, vjp=_clamp_vjp, args=("self", "min", "max"), save=("self", "min", "max"),
      grad_fn=lambda ins, at: "ClampBackward0" if _is_tensor(ins[1]) or _is_tensor(ins[2])
      else "ClampBackward1", kind="elementwise", promote=(0, 1, 2), scalar_args=("min", "max"),
      functions=("clamp", "clip"))


def _clamp_min_vjp(c, g):
    x, lo = c.self, c.min
    keep = x >= lo
    return (g * keep if c.needs(0) else None,
            g * keep.logical_not() if c.needs(1) else None)


def _clamp_max_vjp(c, g):
    x, hi = c.self, c.max
    keep = x <= hi
    return (g * keep if c.needs(0) else None,
            g * keep.logical_not() if c.needs(1) else None)


# Tensor.clamp_min / clamp_max are ops of their own in PyTorch (ClampMin/ClampMaxBackward0 for
# a number bound, ...Backward1 for a tensor one), apart from clamp(min=...) (ClampBackward1)
defop("clamp_min", lambda x, lo: _clamp(x, lo, None), vjp=_clamp_min_vjp, args=("self", "min"),
      save=("self", "min"), kind="elementwise", promote=(0, 1),
      grad_fn=lambda ins, at: "ClampMinBackward1" if _is_tensor(ins[1]) else "ClampMinBackward0",
      functions=("clamp_min",))
defop("clamp_max", lambda x, hi: _clamp(x, None, hi), vjp=_clamp_max_vjp, args=("self", "max"),
      save=("self", "max"), kind="elementwise", promote=(0, 1),
      grad_fn=lambda ins, at: "ClampMaxBackward1" if _is_tensor(ins[1]) else "ClampMaxBackward0",
      functions=("clamp_max",))


def _max_min_vjp(pick):
    def vjp(c, g):
        a, b = c.self, c.other
        wa = (pick(a, b)) + (a == b) * 0.5
        return (g * wa if c.needs(0) else None, g * (1 - wa) if c.needs(1) else None)
    return vjp


_binary("maximum", np.maximum, _max_min_vjp(lambda a, b: a > b), "MaximumBackward0",
        save=("self", "other"), methods=("maximum",), functions=("maximum",))
_binary("minimum", np.minimum, _max_min_vjp(lambda a, b: a < b), "MinimumBackward0",
        save=("self", "other"), methods=("minimum",), functions=("minimum",))
defop("where", lambda c, a, b: np.where(c, a, b),
      vjp=lambda c, g: (None, g.where(c.condition, 0) if c.needs(1) else None,
                        g.where(c.condition.logical_not(), 0) if c.needs(2) else None),
      grad_fn="WhereBackward0", args=("condition", "self", "other"), save=("condition",),
      kind="elementwise", promote=(1, 2), nondiff=("condition",), number_edges=True)



def _times(x, value):
    return x if value == 1 else x * value


def _addcmul(a, t1, t2, value=1):
    return np.add(a, _times(np.multiply(t1, t2), value))


def _addcdiv(a, t1, t2, value=1):
    return np.add(a, _times(np.divide(t1, t2), value))


defop("addcmul", _addcmul, args=("self", "tensor1", "tensor2"), save=("tensor1", "tensor2"),
      vjp=lambda c, g: (g, _times(g * c.tensor2, c.value) if c.needs(1) else None,
                        _times(g * c.tensor1, c.value) if c.needs(2) else None),
      grad_fn="AddcmulBackward0", kind="elementwise", promote=(0, 1, 2), functions=("addcmul",))
defop("addcdiv", _addcdiv, args=("self", "tensor1", "tensor2"), save=("tensor1", "tensor2"),
      vjp=lambda c, g: (g, _times(g / c.tensor2, c.value) if c.needs(1) else None,
                        _times(-g * c.tensor1 / (c.tensor2 * c.tensor2), c.value)
                        if c.needs(2) else None),
      grad_fn="AddcdivBackward0", kind="elementwise", promote=(0, 1, 2), functions=("addcdiv",))


def _lerp(a, b, w):
    # PyTorch's formula: from the nearer end, so lerp(a, b, 1) is b exactly
    d = np.subtract(b, a)
    return np.where(np.abs(w) < 0.5, a + w * d, b - d * (1 - w)).astype(np.result_type(a, b),
                                                                        copy=False)


def _lerp_vjp(c, g):
    w = c.weight
    return (g * (1 - w) if c.needs(0) else None, g * w if c.needs(1) else None,
            g * (c.end - c.self) if c.needs(2) else None)


# lerp.Scalar (LerpBackward0) and lerp.Tensor (LerpBackward1): a number weight is a Scalar
defop("lerp", _lerp, vjp=_lerp_vjp, args=("self", "end", "weight"),
      save=("self", "end", "weight"), kind="elementwise", promote=(0, 1, 2),
      grad_fn=lambda ins, at: "LerpBackward1" if _is_tensor(ins[2]) else "LerpBackward0",
      scalar_args=("weight",), functions=("lerp",))

# ---- comparisons and logic (no gradient) ----------------------------------------------

for _name, _fn, _alias in (("eq", np.equal, ()), ("ne", np.not_equal, ()),
                           ("lt", np.less, ("less",)), ("le", np.less_equal, ()),
                           ("gt", np.greater, ("greater",)), ("ge", np.greater_equal, ())):
    defop(_name, _fn, args=("self", "other"), kind="elementwise", promote=(0, 1),
          methods=(_name, f"__{_name}__") + _alias, functions=(_name,) + _alias)
defop("logical_and", np.logical_and, args=("self", "other"), kind="elementwise",
      methods=("logical_and", "__and__", "__rand__"), functions=("logical_and",))
defop("logical_or", np.logical_or, args=("self", "other"), kind="elementwise",
      methods=("logical_or", "__or__", "__ror__"), functions=("logical_or",))
defop("logical_xor", np.logical_xor, args=("self", "other"), kind="elementwise",
      methods=("logical_xor", "__xor__", "__rxor__"), functions=("logical_xor",))
defop("logical_not", np.logical_not, kind="elementwise",
      methods=("logical_not", "__invert__"), inplace=("logical_not_",), functions=("logical_not",))
defop("isnan", np.isnan, kind="elementwise",
      methods=("isnan",), inplace=("isnan_",), functions=("isnan",))
defop("isfinite", np.isfinite, kind="elementwise",
      methods=("isfinite",), inplace=("isfinite_",), functions=("isfinite",))
defop("floor", np.floor, kind="elementwise", vjp=lambda c, g: (g.new_zeros(g.shape),),
      grad_fn="FloorBackward0", methods=("floor",), inplace=("floor_",), functions=("floor",))
defop("round", np.round, kind="elementwise", vjp=lambda c, g: (g.new_zeros(g.shape),),
      grad_fn="RoundBackward0", methods=("round",), inplace=("round_",), functions=("round",))

# ---- copies, casts and fills ------------------------------------------------------------


def _clone(x, memory_format="preserve"):
    return np.array(x, copy=True, order="C" if memory_format == "contiguous" else "K")


defop("clone", _clone, vjp=lambda c, g: (g,), grad_fn="CloneBackward0", kind="elementwise",
      functions=("clone",))
defop("to_dtype", lambda x, dtype: x.astype(dtype), vjp=lambda c, g: (g,),
      grad_fn="ToCopyBackward0", kind="elementwise")
defop("fill", lambda x, value: np.full_like(x, value, order="K"),
      vjp=lambda c, g: (g.new_zeros(g.shape), g.sum() if c.needs(1) else None), args=("self", "value"),
      # PyTorch: fill_.Scalar -> FillBackward2, fill_.Tensor -> FillBackward3 (the fill op is
      # only reached in place; the out-of-place fill.Scalar/fill.Tensor are 0 and 1)
      grad_fn=lambda ins, at: "FillBackward3" if _is_tensor(ins[1]) else "FillBackward2",
      kind="elementwise")
defop("full", lambda shape, value, dtype: np.full(shape, value, dtype=dtype), args=(),
      kind="creation", doc="a tensor of one value (zeros, ones, new_full): no literal data")
defop("zero", lambda x: np.zeros_like(x, order="K"), vjp=lambda c, g: (g.new_zeros(g.shape),),
      grad_fn="ZeroBackward0", kind="elementwise")
defop("copy", lambda x, src: np.array(np.broadcast_to(src, x.shape), dtype=x.dtype, order="K"),
      vjp=lambda c, g: (g.new_zeros(g.shape), g), args=("self", "src"), grad_fn="CopyBackwards",
      kind="elementwise")
