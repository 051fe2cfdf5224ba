"""Inverse trigonometric and special functions: asin, acos, atan, atan2, erfc, erfinv, lgamma,
digamma, polygamma. Each is one elementwise op with PyTorch's backward formula and node.

Eager asin/acos/atan are NumPy's (libm's), atan2 a native loop where one takes it
(compile/eager_binary.py); the others are special_numpy.py's (the
methods of special_kernels.py, which native code evaluates too: llgrad/codegen/lowerings/
vecmath_special.py). polygamma of order n >= 2 is Cephes' zeta, as PyTorch's kernel, and
has no native lowering (a graph with it runs on the interpreter)."""
import math

import numpy as np

from .optable import defop
from .special_numpy import np_digamma, np_erfc, np_erfinv, np_lgamma, np_polygamma

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_HALF_SQRT_PI = 0.5 * math.sqrt(math.pi)


def _unary(name, impl, vjp, grad_fn, aliases=(), save=("self",), cost=8, **kw):
    names = (name,) + aliases
    return defop(name, impl, vjp=vjp, grad_fn=grad_fn, save=save, kind="elementwise",
                 promote=(0,), float_out=True, methods=names,
                 inplace=tuple(n + "_" for n in names), functions=names, cost=cost, **kw)


# PyTorch's formulas (tools/autograd/derivatives.yaml): asin: grad * (-self * self + 1).rsqrt()
_unary("asin", np.arcsin, lambda c, g: (g * (1 - c.self * c.self).rsqrt(),),
       "AsinBackward0", aliases=("arcsin",))
_unary("acos", np.arccos, lambda c, g: (g * -((1 - c.self * c.self).rsqrt()),),
       "AcosBackward0", aliases=("arccos",))
_unary("atan", np.arctan, lambda c, g: (g / (c.self * c.self + 1),),
       "AtanBackward0", aliases=("arctan",))


def _atan2_vjp(c, g):
    # PyTorch's: 0 where self^2 + other^2 is 0 (at the origin, or underflowed)
    denom = c.self * c.self + c.other * c.other
    recip = denom.reciprocal().masked_fill(denom == 0, 0)
    return (g * c.other * recip if c.needs(0) else None,
            g * -c.self * recip if c.needs(1) else None)


_native_atan2 = [None]  # a native atan2 of two arrays (compile/eager_binary.py installs it)


def set_native_atan2(fn):
    """fn(y, x) -> array or None, tried by the eager atan2 before np.arctan2."""
    _native_atan2[0] = fn


def _atan2(y, x):
    # np.arctan2 is libm's scalar loop (~9x torch's vectorised kernel): the native loop of the
    # lowering native code runs (special_kernels.atan2 in double, rounded once) where it takes
    # the operands, the same values within float32 rounding
    fn = _native_atan2[0]
    r = None if fn is None else fn(y, x)
    return np.arctan2(y, x) if r is None else r


# atan2(input, other): both tensors (PyTorch takes no Python number here: the runtime's
# methods check); promoted as a binary float op (int operands give float32)
defop("atan2", _atan2, vjp=_atan2_vjp, grad_fn="Atan2Backward0", args=("self", "other"),
      save=("self", "other"), kind="elementwise", promote=(0, 1), float_out=True, cost=12)


def _fmod_vjp(c, g):
    # PyTorch's: self: grad; other: -grad * self.div(other, rounding_mode="trunc")
    return (g if c.needs(0) else None,
            -g * c.self.div(c.other, rounding_mode="trunc") if c.needs(1) else None)


# fmod of floats: C's fmod, exact as PyTorch's kernel (x - trunc(x / y) * y rounds the
# quotient: -0.25 % -0.001 came out -0 for PyTorch's -0.001, -1e20 % 3 -0 for 2); fmod and
# remainder (llgrad/runtime/functions_math.py) are built on it
defop("fmod_float", np.fmod, vjp=_fmod_vjp, grad_fn="FmodBackward1", args=("self", "other"),
      save=("self", "other"), kind="elementwise", promote=(0, 1), float_out=True, cost=8)


def _np_remainder(a, b):
    r = np.fmod(a, b)
    return np.where((r != 0) & ((r < 0) != (b < 0)), r + b, r)   # (with other's sign)


# remainder of floats: fmod moved to other's sign, as PyTorch's kernel; its derivative for
# other is -grad * floor_divide(self, other) (exact: -0.25 // -0.001 is 249, not 250)
defop("remainder_float", _np_remainder, grad_fn="RemainderBackward1",
      vjp=lambda c, g: (g if c.needs(0) else None, -g * c.self.div(
          c.other, rounding_mode="floor") if c.needs(1) else None),
      args=("self", "other"), save=("self", "other"), kind="elementwise", promote=(0, 1),
      float_out=True, cost=10)

_unary("erfc", np_erfc,
       lambda c, g: (g * (-_TWO_OVER_SQRT_PI * (-(c.self * c.self)).exp()),), "ErfcBackward0",
       eager_native=True)
# (PyTorch saves self and computes erfinv again: its result may be written in place after)
_unary("erfinv", np_erfinv,
       lambda c, g: (g * (_HALF_SQRT_PI * (lambda r: r * r)(c.self.erfinv()).exp()),),
       "ErfinvBackward0", eager_native=True)
_unary("lgamma", np_lgamma, lambda c, g: (g * c.self.digamma(),), "LgammaBackward0", cost=16,
       eager_native=True)
_unary("digamma", np_digamma, lambda c, g: (g * c.self._op("polygamma", n=1),),
       "DigammaBackward0", cost=16,
       eager_native=True)
# polygamma(n, input) with n an attribute (n >= 0); its methods take n first (runtime).
# In place (x.polygamma_(n)) PyTorch's node is a derivative of its own, PolygammaBackward1
for _name, _node in (("polygamma", "PolygammaBackward0"), ("polygamma_", "PolygammaBackward1")):
    defop(_name, np_polygamma, vjp=lambda c, g: (g * c.self._op("polygamma", n=c.n + 1),),
          grad_fn=_node, save=("self",), kind="elementwise", promote=(0,), float_out=True,
          cost=16)


# ---- xlogy, xlog1py, entr ---------------------------------------------------------------------
# PyTorch's kernels: nan where y is nan, else +0 where x is 0 (0 * log(0.5) would be -0),
# else x * log(y); entr: -x log x above 0, 0 at 0, -inf below, nan kept. One op each so
# that the gradients are PyTorch's formulas everywhere (derivatives.yaml), at x == 0 too:
# xlogy's other gets x / y (nan at (0, 0)), entr's -(1 + log x) (inf at 0, nan below).

def _in_float(f):
    def impl(*xs):
        half = xs[0].dtype == np.float16
        with np.errstate(all="ignore"):
            r = f(*(a.astype(np.float32) if half else a for a in xs))
        return r.astype(np.float16) if half else r
    return impl


def _xlog(log):
    def impl(x, y):
        r = x * log(y)
        return np.where((x == 0) & (y == y), np.zeros((), r.dtype), r)
    return _in_float(impl)


def _xlog_vjp(op, edge):
    def vjp(c, g):
        x, y = c.self, c.other
        # PyTorch's formula, the op itself on (g, y): 0 where g is 0 (a where() upstream),
        # where g * log(y) would be nan at y == 0
        gx = g._op(op, y).masked_fill((x == 0) & (y <= edge), 0) if c.needs(0) else None
        gy = g * x / (y if edge == 0 else y + 1) if c.needs(1) else None
        return gx, gy
    return vjp


defop("xlogy_float", _xlog(np.log), vjp=_xlog_vjp("xlogy_float", 0), grad_fn="XlogyBackward0",
      args=("self", "other"), save=("self", "other"), kind="elementwise", promote=(0, 1),
      float_out=True, cost=8)
defop("xlog1py_float", _xlog(np.log1p), vjp=_xlog_vjp("xlog1py_float", -1),
      grad_fn="SpecialXlog1PyBackward0", args=("self", "other"), save=("self", "other"),
      kind="elementwise", promote=(0, 1), float_out=True, cost=8)


@_in_float
def _entr(x):
    pos = x > 0
    r = np.where(pos, -x * np.log(np.where(pos, x, 1)), np.where(x == 0, 0, -np.inf))
    return np.where(x != x, x, r).astype(x.dtype)


defop("entr", _entr, vjp=lambda c, g: (g * -(1 + c.self.log()),),
      grad_fn="SpecialEntrBackward0", save=("self",), kind="elementwise", promote=(0,),
      float_out=True, cost=8)
