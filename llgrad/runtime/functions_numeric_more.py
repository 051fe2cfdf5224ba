"""Elementwise functions no op of the table computes, evaluated with NumPy: frexp (and its
inverse ldexp, a composition of ops), nextafter and igamma / igammac (the regularised
incomplete gamma functions, torch.special.gammainc / gammaincc); and i0 (Bessel I0, an
op's). Inside llgrad.compile a
call of the NumPy ones runs eagerly (a graph break naming the line). Their first
derivatives are PyTorch's (igamma's in x is x^(a-1) e^-x / Gamma(a), in a PyTorch defines
none), attached as value + d * (x - x.detach()) so that autograd sees ordinary ops; a second
derivative through them is zero."""
import math

import numpy as np

from . import dispatch, dtypes, trace_state
from ..ir import bfloat16 as bf16_values
from ..ir.ops_shape import sum_to_shape
from ..ir.optable import OpDef
from ..ir.special_numpy import np_erfc
from .dispatch import call, scalar_type_name as tname
from .functions import export, where
from .functions_math import attach, make_inplace
from .math_operands import as_type, float_type
from .memory_layout import iterator_layout
from .shapes import broadcast_shapes
from .node_names import failing_node, rename, torch_node
from .return_types import named_result
from .tensor import Tensor
from .creation import tensor as _tensor
from .vmap_fallback import per_sample


def _untraceable(what):
    tracer = trace_state.state.tracer
    if tracer is not None:
        tracer.untraceable(what)


def _arg(x, fn, name, pos):
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}(): argument '{name}' (position {pos}) must be Tensor, not "
                        f"{type(x).__name__}")
    return x


def _with_grad(value, dtype, terms, node, inputs=None):
    """The tensor of value (a NumPy array) as dtype, differentiable through terms [(x, d)]:
    d (a NumPy array) is d value / d x; laid out as PyTorch lays out an elementwise result
    of inputs (default: the terms' tensors)."""
    # (bfloat16's memory holds bfloat16 values only: value rounded to them)
    value = dtypes.cast_array(np.asarray(value), dtype) if dtype is dtypes.bfloat16 else \
        np.array(value, dtype=dtype.np, order="C")     # (ascontiguousarray: >= 1 dim)
    inputs = [x for x, _ in terms] if inputs is None else inputs
    out = Tensor._from_array(iterator_layout(value, inputs, None))
    for x, d in terms:
        # (-0.0: adding it changes no value, -0.0 and nan included; a dual tensor of forward
        # AD takes the same path, so that its tangent is d times x's)
        if x.requires_grad or dispatch.forward_ad is not None and \
                dispatch.forward_ad.get(x) is not None:
            d = Tensor._from_array(dtypes.cast_array(np.asarray(d), dtype))
            out = out + call(_ZERO_WITH_GRAD, (x.to(dtype), d), {})
    return rename(out, node) if out.requires_grad else out


# (not in the table: these functions run eagerly only) -0.0 with the derivative d: the
# incoming gradient times d, not masked where x is inf or nan (PyTorch's formulas are not)
_ZERO_WITH_GRAD = OpDef(
    "zero_with_grad", lambda x, d: np.full(np.broadcast_shapes(x.shape, d.shape), -0.0, x.dtype),
    vjp=lambda c, g: (sum_to_shape(g * c.d, c.shape(0)), None), args=("self", "d"),
    save=("d",), nondiff=("d",), grad_fn="ZeroWithGradBackward")


@per_sample
def frexp(input):
    """As torch.frexp: (mantissa, exponent) with input = mantissa * 2^exponent, |mantissa| in
    [0.5, 1) (int32 exponents)."""
    _arg(input, "frexp", "input", 1)
    if not input._dtype.is_floating_point:
        raise RuntimeError("torch.frexp() only supports floating-point dtypes")
    _untraceable("frexp")
    x = np.asarray(input._data)
    m, e = np.frexp(x)
    with np.errstate(over="ignore"):
        d = np.ldexp(np.ones_like(x), -e)
    mant = _with_grad(m, input._dtype, [(input, d)], "FrexpBackward0")
    return _FREXP(mant, Tensor._from_array(e.astype(np.int32)))


@per_sample
def nextafter(input, other):
    """As torch.nextafter: the next floating-point value after input towards other (the
    gradient goes to input unchanged)."""
    _arg(input, "nextafter", "input", 1)
    other = other if isinstance(other, Tensor) else _tensor(other)
    broadcast_shapes(input._data.shape, other._data.shape)     # (PyTorch's error)
    dt = dtypes.result_type(input, other)
    if not dt.is_floating_point:
        raise NotImplementedError(f"\"nextafter_cpu\" not implemented for '{tname(dt)}'")
    _untraceable("nextafter")
    a = dtypes.cast_array(input._data, dt)
    b = dtypes.cast_array(other._data, dt)
    # (bfloat16: its own neighbours, not float32's, of the values cast to it)
    value = bf16_values.next_after(a, b) if dt is dtypes.bfloat16 else np.nextafter(a, b)
    # (PyTorch's derivative: the incoming gradient where input != other, 0 where they meet)
    moved = np.broadcast_to(a != b, value.shape).astype(np.float64)
    return _with_grad(value, dt, [(input, moved), (other, np.zeros_like(value))],
                      "NextafterBackward0")


def i0(input):
    """As torch.i0 (torch.special.i0): the modified Bessel function of the first kind, order
    0 (integer inputs give the default float dtype): PyTorch's Cephes series, the op
    scaled_bessel_i (llgrad/ir/ops_special_bessel.py), differentiable (I0' = I1)."""
    _arg(input, "i0", "input", 1)
    return input._op("scaled_bessel_i", fn="i0")


def _lgamma(a):
    return np.vectorize(math.lgamma, otypes=[np.float64])(np.where(a > 0, a, 1.0))


def _igamma(a, x):
    """P(a, x) and Q(a, x) = 1 - P, the regularised lower and upper incomplete gamma
    functions, in float64 (the series below a + 1, Lentz's continued fraction above: Numerical
    Recipes' gammp; each the smaller one directly, so a tail 1e-22 is not 1 - 1 = 0)."""
    a, x = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(x, np.float64))
    out = np.full(a.shape, np.nan)
    # PyTorch's cases in its order (calc_igamma), which a NaN operand falls through:
    # P(inf, nan) is 0, P(nan, inf) 1, P(nan, 0) 0
    todo = ~((x < 0) | (a < 0))
    for case, value in (((a == 0), np.where(x > 0, 1.0, np.nan)), ((x == 0), 0.0),
                        (np.isinf(a), np.where(np.isinf(x), np.nan, 0.0)), (np.isinf(x), 1.0)):
        case = todo & case
        out[case] = np.broadcast_to(value, a.shape)[case]
        todo &= ~case
    rest = todo & ~np.isnan(a) & ~np.isnan(x)
    # (where Cephes takes it: the series and fraction lose digits there, 1e20 gave nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        big = rest & (a >= 1e5) & (np.abs(x - a) < 4.5 * np.sqrt(a))
    rest = rest & ~big
    A, X = a[rest], x[rest]
    with np.errstate(over="ignore", under="ignore", invalid="ignore", divide="ignore"):
        front = np.exp(-X + A * np.log(X) - _lgamma(A))
        ser = X < A + 1
        p = np.empty(A.shape)
        sa, sx = A[ser], X[ser]
        term = 1.0 / sa
        total = term.copy()
        for n in range(1, 100000):
            term = term * sx / (sa + n)
            total = total + term
            if not np.any(np.abs(term) > np.abs(total) * 1e-17):
                break
        p[ser] = total * front[ser]
        ca, cx = A[~ser], X[~ser]
        tiny = 1e-300
        b = cx + 1 - ca
        c = np.full(ca.shape, 1 / tiny)
        d = 1 / b
        h = d.copy()
        for i in range(1, 100000):
            an = -i * (i - ca)
            b = b + 2
            d = an * d + b
            d = np.where(np.abs(d) < tiny, tiny, d)
            c = b + an / c
            c = np.where(np.abs(c) < tiny, tiny, c)
            d = 1 / d
            delta = d * c
            h = h * delta
            if not np.any(np.abs(delta - 1) > 1e-16):
                break
        q = np.empty(A.shape)
        q[ser] = 1 - p[ser]
        q[~ser] = front[~ser] * h
        p[~ser] = 1 - q[~ser]
    upper = np.subtract(1, out, out=np.empty_like(out))     # (an array for 0-d too)
    out[rest], upper[rest] = p, q
    if big.any():
        out[big], upper[big] = _igamma_asymptotic(a[big], x[big])
    return out, upper


def _log1pmx(s):
    """log(1 + s) - s without the cancellation near 0 (its series below |s| = 0.5)."""
    small = np.abs(s) < 0.5
    t = np.where(small, s, 0.0)
    total, power = np.zeros_like(t), t.copy()
    for n in range(2, 60):
        power = -power * t
        total = total + power / n
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(small, total, np.log1p(s) - s)


# the first coefficients of Temme's expansion (Cephes igam.c's d[k][n], DLMF 8.12)
_TEMME = ((-1 / 3, 1 / 12, -2 / 135, 1 / 864, 1 / 2835), (-1 / 540, -1 / 288, 1 / 378),
          (25 / 6048,))


def _igamma_asymptotic(a, x):
    """P and Q for a >= 1e5 and |x - a| < 4.5 sqrt(a) by Temme's uniform expansion, as
    PyTorch's (Cephes'): there |eta| < 0.015, so a few coefficients reach float64."""
    with np.errstate(over="ignore", under="ignore", invalid="ignore", divide="ignore"):
        eta = np.sign(x - a) * np.sqrt(np.maximum(-2 * _log1pmx((x - a) / a), 0.0))
        y = eta * np.sqrt(a / 2)
        total = np.zeros_like(a)
        for k, coef in enumerate(_TEMME):
            total = total + np.polyval(coef[::-1], eta) / a ** k
        r = np.exp(-0.5 * a * eta * eta) * total / np.sqrt(2 * np.pi * a)
        return 0.5 * np_erfc(-y) - r, 0.5 * np_erfc(y) + r


def _igamma_fn(input, other, upper):
    fn = "igammac" if upper else "igamma"
    _arg(input, fn, "input", 1)
    other = other if isinstance(other, Tensor) else _tensor(other)
    broadcast_shapes(input._data.shape, other._data.shape)     # (PyTorch's error)
    rt = dtypes.result_type(input, other)
    if not rt.is_floating_point:
        raise NotImplementedError(f"\"{fn}_cpu\" not implemented for '{tname(rt)}'")
    _untraceable(fn)
    dt = float_type(input, other)
    a, x = ((dtypes.cast_array(t._data, dt) if dt is dtypes.bfloat16 else t._data)
            for t in (input, other))        # (bfloat16: the operands cast to it, as PyTorch's)
    a, x = np.asarray(a, np.float64), np.asarray(x, np.float64)
    p, q = _igamma(a, x)
    with np.errstate(over="ignore", under="ignore", invalid="ignore", divide="ignore"):
        dx = np.exp(-x + (a - 1) * np.log(x) - _lgamma(a))
    node = "IgammacBackward0" if upper else "IgammaBackward0"
    out = _with_grad(q if upper else p, dt, [(other, -dx if upper else dx)], node,
                     [input, other])
    if input.requires_grad:     # (a backward reaching input raises, as PyTorch's)
        never = Tensor._from_array(np.zeros(out._data.shape, bool))
        out = failing_node(out + where(never, input.to(dt), 0.0), node,
                           f"the derivative for '{fn}: input' is not implemented.")
    return out


@per_sample
def igamma(input, other):
    """As torch.igamma (torch.special.gammainc): the regularised lower incomplete gamma
    function P(input, other)."""
    return _igamma_fn(input, other, False)


@per_sample
def igammac(input, other):
    """As torch.igammac (torch.special.gammaincc): the regularised upper incomplete gamma
    function Q(input, other) = 1 - P(input, other)."""
    return _igamma_fn(input, other, True)


@torch_node("LdexpBackward0")
def ldexp(input, other):
    """As torch.ldexp: input * 2 ** other, the power in a floating other's own dtype, as
    PyTorch's (float32 * 2 ** float16 rounds the power to float16 first)."""
    if input._dtype.is_floating_point and other._dtype is dtypes.bool_:     # (its kernel's)
        raise NotImplementedError("\"ldexp_cpu_exp\" not implemented for 'Bool'")
    rt = float_type(input, other)
    if input._dtype.is_floating_point and not other._dtype.is_floating_point:
        # (PyTorch's kernel for integer exponents, std::ldexp, rounds once: finite wherever
        # the result is, where 2 ** other alone overflows: float64, the power in two halves)
        e = as_type(other, dtypes.float64).clamp(-2046, 2046)
        h = (e * 0.5).floor()
        return (as_type(input, dtypes.float64) * 2.0 ** h * 2.0 ** (e - h)).to(rt)
    e = other if other._dtype.is_floating_point else as_type(other, rt)
    return as_type(input, rt) * (2.0 ** e).to(rt)


_FREXP = named_result("frexp", ["mantissa", "exponent"])

for _fn in (frexp, nextafter, i0, igamma, igammac):
    export(_fn)
    setattr(Tensor, _fn.__name__, _fn)
for _fn, _name in ((nextafter, "nextafter_"), (i0, "i0_"), (igamma, "igamma_"),
                   (igammac, "igammac_")):
    setattr(Tensor, _name, make_inplace(_fn, _name))
export(make_inplace(i0, "i0_"))
attach(ldexp, inplace_name="ldexp_")
