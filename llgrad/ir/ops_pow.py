"""pow: PyTorch's special exponents (products, a division, sqrt), NumPy's power otherwise
(libm's for one float64 element),
and its VJP for each of the three overloads (tensor ** number, tensor ** tensor,
number ** tensor)."""
import cmath
import math

import numpy as np

from .libm_np import libm
from .ops_elementwise import _is_tensor
from .optable import conj, defop


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
            # (PyTorch's order, grad * (e * x**(e - 1)): e * 0 is 0 where g * e would be inf)
            gx = g * conj(e * x ** (e - 1))
            if _is_tensor(e):
                gx = gx.masked_fill(e == 0, 0)     # x**0 is constant, even at x == 0
    if c.needs(1):
        r = c.result
        if _is_tensor(x):
            # 0 where x == 0 and e >= 0; log(1) there keeps -inf (and 0 * -inf = nan) out of
            # the graph, so double backward stays finite
            zero = (x == 0) & ((e.real if e.dtype.is_complex else e) >= 0)
            ge = g * conj((r * x.masked_fill(zero, 1).log()).masked_fill(zero, 0))
        elif isinstance(x, complex) and x != 0:
            ge = g * conj(r * cmath.log(x))
        elif x != 0:
            # d(a**e)/de = a**e * log(a), nan below 0
            ge = g * conj(r * (math.log(x) if x > 0 else math.nan))
        else:
            # 0 ** e: 0 where e >= 0 (PyTorch's convention), else r * log(0) (inf * -inf); the
            # log as a constant 0 / -inf, so double backward stays finite where it is 0
            ge = g * (r * g.new_zeros(g.shape).masked_fill((e >= 0).logical_not(), -math.inf))
    return gx, ge


def _pow(x, e):
    # A float tensor to a Python number in {2, 3, -1, -2, -0.5} is PyTorch's fast path:
    # products, a division, 1 / sqrt (x ** 3 = (x * x) * x, not libm's pow: an ulp apart in
    # 30% of elements, and 200x slower), in float32 for float16 (ATen's reduced-precision
    # rule: one rounding to half at the end; its -0.5 is pow's), as the native lowering
    # does. x ** 0.5 is sqrt(x), as in PyTorch (sqrt(-0) = -0, sqrt(-inf) = nan): NumPy
    # before 2.3 called C's pow there (+0, +inf).
    if type(e) in (int, float) and getattr(x, "dtype", None) is not None and \
            x.dtype.kind == "f" and e in _POW_FAST:
        if x.dtype != np.float16 or e == 0.5:
            return _POW_FAST[e](x)
        if e != -0.5:
            return _POW_FAST[e](x.astype(np.float32)).astype(np.float16)
    if isinstance(e, np.ndarray) and e.dtype.kind == "i" and np.asarray(x).dtype.kind in "iub" \
            and (e < 0).any():
        # an integer tensor exponent below 0 does not raise in PyTorch: 1 and -1 to it are
        # 1 and +-1, anything else 0 (truncated 1 / x**-e); only a Python-number one raises
        r = np.power(x, np.maximum(e, 0))
        odd = np.where(e % 2 == 1, -1, 1)
        return np.where(e < 0, np.where(x == 1, 1, np.where(x == -1, odd, 0)), r).astype(r.dtype)
    r = np.power(x, e)
    if r.dtype == np.float64 and r.size == 1:
        # one float64 element: libm's pow, as PyTorch's scalar loop (std::pow), a Python
        # float's ** (a compiled step's `beta ** t`) and native code's llvm.pow compute it;
        # NumPy's vector loop is an ulp apart from it in ~5% of values
        r = libm("pow", np.asarray(x, np.float64), np.asarray(e, np.float64)).reshape(r.shape)
    return r


# (x ** 1 is x exactly, PyTorch's copy: the backward of x ** 2 computes it, and NumPy's pow
# took 2x a copy's time on a transformer's activations)
_POW_FAST = {1: lambda x: x.copy(order="K"), 2: lambda x: x * x, 3: lambda x: x * x * x,
             -1: np.reciprocal, -2: lambda x: np.reciprocal(x * x), 0.5: np.sqrt,
             -0.5: lambda x: np.reciprocal(np.sqrt(x))}


defop("pow", _pow, vjp=_pow_vjp, grad_fn=_pow_name, args=("self", "exponent"),
      save=("self", "exponent", "result"), kind="elementwise", promote=(0, 1),
      functions=("pow", "square"), cost=4, complex=True)
