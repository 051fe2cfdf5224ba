"""Clamps, elementwise extremes, selection and interpolation: clamp (and its one-sided
forms), maximum, minimum, where, addcmul, addcdiv, lerp."""
import numpy as np

from . import bitselect
from .fused_madd import fma, native_axpy
from .ops_elementwise import _binary, _is_tensor
from .optable import conj, defop


def keep_x_at_ties(fn, bound, x):
    """np.maximum / np.minimum (fn) of a bound and x keeping x at a tie (clamp(-0.0, min=0)
    is -0.0, as in PyTorch), which NumPy's float32/64 loops do and its float16 loop does not
    (it keeps the first operand): float16 goes through float32, exactly."""
    if getattr(x, "dtype", None) != np.float16:
        return fn(bound, x)
    b = np.asarray(bound, np.float16).astype(np.float32)
    return fn(b, x.astype(np.float32)).astype(np.float16)


def _clamp(x, lo, hi):
    # x second: np.maximum/np.minimum give the second operand at a tie, so x is kept there
    # (clamp(-0.0, min=0.0) is -0.0, as in PyTorch); NaN (x or a bound) propagates
    if type(lo) in (int, float) and type(hi) in (int, float) and \
            getattr(x, "dtype", None) is not None and x.dtype.kind == "f":
        # (NumPy's clip: PyTorch's values for two number bounds, NaN, -0 at a tie and
        # lo > hi included, at a third of maximum-then-minimum's time)
        return np.clip(x, lo, hi)
    if lo is None and hi is None:
        return np.array(x, copy=True) if isinstance(x, np.ndarray) else x
    if lo is not None:
        x = keep_x_at_ties(np.maximum, lo, x)
    if hi is not None:
        x = keep_x_at_ties(np.minimum, hi, x)
    return x


def _clamp_vjp(c, g):
    x, lo, hi = c.self, c.min, c.max
    mask = None
    if lo is not None:
        mask = x >= lo
    if hi is not None:
        mask = (x <= hi) if mask is None else mask & (x <= hi)
    # (PyTorch selects, where(mask, g, 0): an inf or nan gradient where the bound wins,
    # sqrt_ after clamp_(min=0), gives 0, not inf * 0)
    gx = g.where(mask, 0) if c.needs(0) and mask is not None else (g if c.needs(0) else None)
    # PyTorch's clamp_backward_min_max: result = min(max(x, lo), hi), so when lo > hi, hi
    # wins everywhere (and at lo == hi, hi has the gradient); a NaN compares false
    glo = ghi = None
    if c.needs(1):
        glo = g.where((x < lo) & (lo < hi) if hi is not None else x < lo, 0)
    if c.needs(2):
        ghi = g.where((x > hi) | (hi < lo) if lo is not None else x > hi, 0)
    return gx, glo, ghi


defop("clamp", _clamp, vjp=_clamp_vjp, args=("self", "min", "max"), save=("self", "min", "max"),
      grad_fn=lambda ins, at: "ClampBackward0" if _is_tensor(ins[1]) or _is_tensor(ins[2])
      else "ClampBackward1", kind="elementwise", promote=(0, 1, 2), scalar_args=("min", "max"),
      functions=("clamp", "clip"))


def _clamp_min_vjp(c, g):
    x, lo = c.self, c.min
    return (g.where(x >= lo, 0) if c.needs(0) else None,
            g.where(x < lo, 0) if c.needs(1) else None)     # (a NaN gives neither a gradient)


def _clamp_max_vjp(c, g):
    x, hi = c.self, c.max
    return (g.where(x <= hi, 0) if c.needs(0) else None,
            g.where(x > hi, 0) if c.needs(1) else None)


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


def _max_min_vjp(loses):
    """PyTorch's: where(a == b, g / 2, g), zero where the operand loses (a NaN loses to
    nothing: both operands of a NaN pair get g)."""
    def vjp(c, g):
        a, b = c.self, c.other
        shared = g.where(a != b, g * 0.5)
        return (shared.masked_fill(loses(a, b), 0) if c.needs(0) else None,
                shared.masked_fill(loses(b, a), 0) if c.needs(1) else None)
    return vjp


_binary("maximum", np.maximum, _max_min_vjp(lambda a, b: a < b), "MaximumBackward0",
        save=("self", "other"), methods=("maximum",), functions=("maximum",))
_binary("minimum", np.minimum, _max_min_vjp(lambda a, b: a > b), "MinimumBackward0",
        save=("self", "other"), methods=("minimum",), functions=("minimum",))
defop("where", bitselect.where,
      vjp=lambda c, g: (None, g.where(c.condition, 0) if c.needs(1) else None,
                        g.where(c.condition.logical_not(), 0) if c.needs(2) else None),
      grad_fn="WhereBackward0", args=("condition", "self", "other"), save=("condition",),
      kind="elementwise", promote=(1, 2), nondiff=("condition",), number_edges=True, complex=True)



def _times(x, value):
    return x if value == 1 else x * value


# PyTorch's kernels and formulas, in their order: self + value * t1 * t2 (value * t1 first),
# self + value * t1 / t2; gradients grad * (t2 * value), grad * (value / t2) and
# -grad * (value * t1 / (t2 * t2)) (an intermediate overflows or underflows where theirs does)

def _half_in_float(fn):
    """fn in float32 for float16 operands, rounded once (PyTorch's CPU kernels)."""
    def impl(a, t1, t2, value=1):
        if np.result_type(a, t1, t2) == np.float16:
            return fn(*(np.asarray(x, np.float32) for x in (a, t1, t2)), value).astype(np.float16)
        return fn(a, t1, t2, value)
    return impl


@_half_in_float
def _addcmul(a, t1, t2, value=1):
    dt = np.result_type(a, t1, t2)
    if dt == np.float32 or dt == np.float64:    # (ATen: fmadd(value * t1, t2, self))
        return np.asarray(fma(_times(t1, value), t2, a, dt))
    return np.add(a, np.multiply(_times(t1, value), t2))


@_half_in_float
def _addcdiv(a, t1, t2, value=1):
    return np.add(a, np.divide(_times(t1, value), t2))


def _over(value, t):
    """value / t, one rounding (Python's value / t is value * reciprocal(t))."""
    return t.new_full(t.shape, value) / t if value != 1 else t.reciprocal()


defop("addcmul", _addcmul, args=("self", "tensor1", "tensor2"), save=("tensor1", "tensor2"),
      vjp=lambda c, g: (g, g * conj(_times(c.tensor2, c.value)) if c.needs(1) else None,
                        g * conj(_times(c.tensor1, c.value)) if c.needs(2) else None),
      grad_fn="AddcmulBackward0", kind="elementwise", promote=(0, 1, 2), functions=("addcmul",),
      complex=True)
defop("addcdiv", _addcdiv, args=("self", "tensor1", "tensor2"), save=("tensor1", "tensor2"),
      vjp=lambda c, g: (g, g * conj(_over(c.value, c.tensor2)) if c.needs(1) else None,
                        -g * conj(_times(c.tensor1, c.value) / (c.tensor2 * c.tensor2))
                        if c.needs(2) else None),
      grad_fn="AddcdivBackward0", kind="elementwise", promote=(0, 1, 2), functions=("addcdiv",),
      complex=True)


def _lerp(a, b, w):
    # PyTorch's formula: from the nearer end, so lerp(a, b, 1) is b exactly (float16 in
    # float32, rounded once)
    if np.result_type(a, b) == np.float16:
        w = w.astype(np.float32) if isinstance(w, np.ndarray) else w
        return _lerp(np.asarray(a, np.float32), np.asarray(b, np.float32), w).astype(np.float16)
    dt = np.result_type(a, b)
    d = np.subtract(b, a)
    if dt != np.float32 and dt != np.float64:
        return np.where(np.abs(w) < 0.5, a + w * d, b - d * (1 - w)).astype(dt, copy=False)
    # ATen's kernel: fmadd(w, d, a) near a, fnmadd(d, 1 - w, b) near b, 1 - w in the dtype
    if type(w) is float or type(w) is int:
        # a number weight picks one formula for every element: only that one is computed
        # (the values np.where would pick; an optimiser's exp_avg.lerp_(grad, 1 - beta1))
        w = dt.type(w)
        # (the native a + alpha * b, rounded once as fma: w * d + a, or b - d * (1 - w)
        # as b + d * -(1 - w), the negation exact)
        native = native_axpy()
        a_, alpha = (a, w) if abs(w) < 0.5 else (b, -(dt.type(1) - w))
        r = native(np.asarray(a_), d, alpha, dt) if native is not None else None
        if r is not None:
            return r
        r = fma(w, d, a, dt) if abs(w) < 0.5 else fma(-d, dt.type(1) - w, b, dt)
        return np.asarray(r)
    w = np.asarray(w, dt)
    return np.where(np.abs(w) < 0.5, fma(w, d, a, dt), fma(-d, dt.type(1) - w, b, dt))


def _lerp_vjp(c, g):
    w = c.weight
    return (g * conj(1 - w) if c.needs(0) else None, g * conj(w) if c.needs(1) else None,
            g * conj(c.end - c.self) if c.needs(2) else None)


# lerp.Scalar (LerpBackward0) and lerp.Tensor (LerpBackward1): a number weight is a Scalar
defop("lerp", _lerp, vjp=_lerp_vjp, args=("self", "end", "weight"),
      save=("self", "end", "weight"), kind="elementwise", promote=(0, 1, 2),
      grad_fn=lambda ins, at: "LerpBackward1" if _is_tensor(ins[2]) else "LerpBackward0",
      scalar_args=("weight",), functions=("lerp",), complex=True)
