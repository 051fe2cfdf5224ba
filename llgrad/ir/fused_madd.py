"""a * b + c rounded once, in NumPy: the value of the fused multiply-adds that PyTorch's CPU
kernels compute (ATen's AVX2 / AVX-512 builds contract x * y + z into one FMA, and some
kernels call vec::fmadd outright: uniform_ and normal_'s low + (high - low) * u, ...).
NumPy rounds the product first, an ulp away from PyTorch in about a third of the elements.
The lowerings use llvm.fma for the same ops, so compiled and eager agree bit for bit."""
import math
from fractions import Fraction

import numpy as np

_SPLIT = 134217729.0    # 2**27 + 1 (Veltkamp's splitting constant for float64)
_F32_DROP = np.int64((1 << 29) - 1)     # the float64 mantissa bits a float32 drops
_F32_HALF = np.int64(1 << 28)           # ... exactly half a float32 ulp: a tie


def _split(a):
    h = a * _SPLIT
    h = h - (h - a)
    return h, a - h


def _two_sum(p, c):
    s = p + c
    bb = s - p
    return s, (p - (s - bb)) + (c - bb)


def fma64(a, b, c):
    """a * b + c of float64 values with one rounding (up to a double rounding once in
    ~2**50): the product's error (Dekker) and the sum's (Knuth) added back at the end."""
    a, b, c = (np.asarray(x, np.float64) for x in (a, b, c))
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    pe = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    s, se = _two_sum(p, c)
    corr = se + pe
    r = np.where(corr == 0, s, s + corr)    # (s + 0 would turn a -0 sum into +0)
    # an operand beyond ~1e300 overflows the split (its error terms NaN), an infinite product
    # or sum its own error terms: there the rounded a * b + c is the value (or the inf / NaN)
    bad = np.isnan(r)
    if bad.any():       # (an infinite c beside a finite product that overflowed: c)
        keep_c = np.isinf(c) & np.isfinite(a) & np.isfinite(b)
        r = np.where(bad, np.where(keep_c, c, p + c), r)
    # a product below the normal range has an error Dekker's split cannot hold: there the
    # exact a * b + c, rounded once by Python's correctly rounded int division (rare)
    tiny = (np.abs(p) < _TINY) & (a != 0) & (b != 0) & np.isfinite(c)
    if tiny.any():
        r = np.array(r, np.float64)
        for i in zip(*np.nonzero(np.broadcast_to(tiny, r.shape))):
            r[i] = _exact(*(float(np.broadcast_to(x, r.shape)[i]) for x in (a, b, c)))
    return r


_TINY = 2.0 ** -960     # (the split's error terms stay exact for products above it)


def _exact(a, b, c):
    """a * b + c rounded once, by exact rational arithmetic; IEEE's sign of a zero sum."""
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    if exact == 0:      # (round to nearest: -0 only when both terms are -0)
        return -0.0 if math.copysign(1, a * b) < 0 and math.copysign(1, c) < 0 else 0.0
    return float(exact)     # (a result rounding to zero keeps its sign: -0.0)


def fma32(a, b, c):
    """a * b + c of float32 values rounded once to float32: the product is exact in float64
    and the sum's error (Knuth) breaks the one case float64's rounding would decide wrongly,
    a sum that lands exactly half-way between two float32 values."""
    a, b, c = (np.asarray(x, np.float32).astype(np.float64) for x in (a, b, c))
    p = a * b
    s = p + c
    tie = (s.view(np.int64) & _F32_DROP) == _F32_HALF   # (rare: the sum's error only there)
    if tie.any():
        s, err = _two_sum(p, c)
        tie &= err != 0
        s = np.where(tie, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)
    return s.astype(np.float32)


def fma(a, b, c, dtype):
    """a * b + c in NumPy float dtype dtype (float32 or float64), rounded once; other
    dtypes (float16: PyTorch computes in float32 and rounds) through float32's."""
    dtype = np.dtype(dtype)
    native = _native_fma[0]
    if native is not None and type(a) is np.ndarray and type(b) is np.ndarray and \
            type(c) is np.ndarray:
        r = native(a, b, c, dtype)      # (the same once-rounded values, on a native loop)
        if r is not None:
            return r
    if dtype == np.float64:
        return fma64(a, b, c)
    if dtype == np.float32:
        return fma32(a, b, c)
    return fma32(a, b, c).astype(dtype)


_native_axpy = [None]   # a native a + alpha * b (compile/eager_axpy.py installs it)
_native_fma = [None]    # a native x * y + z of three arrays (compile/eager_axpy.py's fma3)


def set_native_fma(fn):
    """fn(x, y, z, dtype) -> array or None, tried by fma before the NumPy emulation."""
    _native_fma[0] = fn


def set_native_axpy(fn):
    """fn(a, b, alpha, dtype, min_elements=...) -> array or None, tried before the NumPy
    emulation."""
    _native_axpy[0] = fn


def native_axpy():
    """The installed native a + alpha * b (set_native_axpy), or None."""
    return _native_axpy[0]


def fused_alpha(a, b, alpha):
    """a + alpha * b for float operands and alpha != 1 as one fused multiply-add, as ATen's
    CPU kernels compute add / sub with an alpha (vec::fmadd: SGD's p.add_(g, alpha=-lr)),
    else None (alpha * b rounded, then the sum)."""
    if alpha == 1 or isinstance(alpha, bool):
        return None
    dt = np.result_type(a, b)
    if dt != np.float32 and dt != np.float64:
        return None
    native = _native_axpy[0]
    r = native(a, b, alpha, dt) if native is not None else None
    return np.asarray(fma(b, alpha, a, dt)) if r is None else r
