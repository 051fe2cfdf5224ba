"""The Bessel and Airy functions of torch.special (airy_ai, bessel_j0/j1/y0/y1,
modified_bessel_i0/i1/k0/k1, scaled_modified_bessel_k0/k1, spherical_bessel_j0, i0e, i1,
i1e) on NumPy arrays: PyTorch's Cephes series (aten/src/ATen/native/Math.h) step for step,
in the input's precision (float32 arithmetic for float32, as PyTorch's kernels: a float64
evaluation rounded once would differ from them near the zeros), with the fused multiply-adds
its compiler makes of a * b + c and libm's sin / cos / exp / log (equal bit for bit on
x86-64 glibc); every branch evaluated over the whole array and the one PyTorch takes
selected."""
import numpy as np

from . import special_bessel_tables as C
from .fused_madd import fma
from .libm_np import libm

_PI_4 = 0.785398163397448309615660845819875721
_3PI_4 = 2.356194490192344928846982537459627163
_SQRT_2_PI = 0.797884560802865355879892119868763737
_TWO_OVER_PI = 0.636619772367581343075535053490057448


def _sin(x):
    return libm("sin", x)


def _cos(x):
    return libm("cos", x)


def _exp(x):
    return libm("exp", x)


def _log(x):
    return libm("log", x)


def _fm(a, b, c):
    return fma(a, b, c, a.dtype)


# (PyTorch's kernels are built with FMA contraction: each r * z + c below is one fused
# operation there, and the series amplify the last-bit difference of rounding twice)
def _horner(z, coeffs):
    """sum coeffs[i] z^(n-1-i), from 0 as PyTorch's loops (0 * inf is nan there too)."""
    t = z.dtype.type
    r = np.zeros_like(z)
    for c in coeffs:
        r = fma(r, z, np.full_like(z, t(c)), z.dtype)
    return r


def _chbevl(y, coeffs):
    """Cephes' Chebyshev series sum at y (Clenshaw's recurrence)."""
    t = y.dtype.type
    b0, b1, b2 = np.full_like(y, t(coeffs[0])), np.zeros_like(y), np.zeros_like(y)
    for c in coeffs[1:]:
        b2, b1 = b1, b0
        b0 = fma(y, b1, -b2, y.dtype) + t(c)
    return t(0.5) * (b0 - b2)


def _airy_ai(x):
    t = x.dtype.type
    neg = np.where(x < t(-2.09), x, t(-3.0))
    zn = t(-2.0) * neg * np.sqrt(-neg) / t(3.0)
    z = t(1.0) / zn
    zz = z * z
    afn, afd = _horner(zz, C.AIRY_AI_AFN), _horner(zz, C.AIRY_AI_AFD)
    agn, agd = _horner(zz, C.AIRY_AI_AGN), _horner(zz, C.AIRY_AI_AGD)
    ang = zn + t(0.25) * t(np.pi)
    left = t(5.64189583547756286948e-01) / np.sqrt(np.sqrt(-neg)) * _fm(
        _sin(ang), t(1.0) + z * z * afn / afd, -(_cos(ang) * (z * agn / agd)))
    pos = np.where(x >= t(2.09), x, t(3.0))
    zeta = t(2.0) * pos * np.sqrt(pos) / t(3.0)
    an, ad = _horner(t(1.0) / zeta, C.AIRY_AI_AN), _horner(t(1.0) / zeta, C.AIRY_AI_AD)
    right = t(5.64189583547756286948e-01) * (an / ad) / (
        t(2.0) * np.sqrt(np.sqrt(pos)) * _exp(zeta))
    # the power series between: each element iterates until its term falls below epsilon
    mid = np.where((x >= t(-2.09)) & (x < t(2.09)), x, t(0.0))
    f, g, m, n = np.ones_like(mid), mid.copy(), np.ones_like(mid), mid.copy()
    z3 = mid * mid * mid
    k, eps = t(1.0), np.finfo(x.dtype).eps
    live = np.ones(mid.shape, bool)
    while live.any():
        m2 = m * z3
        k += t(1.0)
        m2 = m2 / k
        n2 = n * z3
        k += t(1.0)
        n2 = n2 / k
        m2 = m2 / k
        f2 = f + m2
        k += t(1.0)
        n2 = n2 / k
        g2 = g + n2
        m, n, f, g = (np.where(live, a, b) for a, b in ((m2, m), (n2, n), (f2, f), (g2, g)))
        live &= np.abs(m2 / f2) > eps
    series = _fm(np.full_like(f, t(0.355028053887817239260)), f,
                 -(t(0.258819403792806798405) * g))
    r = np.where(x < t(-2.09), left, np.where(x >= t(2.09), right, series))
    r = np.where(x > t(103.892), t(0.0), r)
    return np.where(np.isinf(x), t(np.nan), np.where(np.isnan(x), x, r))


def _asymptotic(x, pp, pq, qp, qq, z, shift, first, second):
    """PyTorch's large-x form of J0/J1/Y0/Y1: (P first(x - shift) -+ 5/x Q second(x -
    shift)) sqrt(2 / pi) / sqrt(x) (the sign: second is -sin for J, cos for Y)."""
    t = x.dtype.type
    p = _horner(z, pp) / _horner(z, pq)
    q = _horner(z, qp) / _horner(z, qq)
    return _fm(p, first(x - t(shift)), t(5.0) / x * q * second(x - t(shift))) * \
        t(_SQRT_2_PI) / np.sqrt(x)


def _neg_sin(v):
    return -_sin(v)


def _bessel_j0(x):
    t = x.dtype.type
    x = np.abs(x)
    xx = x * x
    small = t(1.0) - x * x / t(4.0)
    mid = (xx - t(5.78318596294678452118e+00)) * (xx - t(3.04712623436620863991e+01)) * \
        _horner(xx, C.BESSEL_J0_RP) / _horner(xx, C.BESSEL_J0_RQ)
    big = _asymptotic(x, C.BESSEL_J0_PP, C.BESSEL_J0_PQ, C.BESSEL_J0_QP, C.BESSEL_J0_QQ,
                      t(25.0) / xx, _PI_4, _cos, _neg_sin)
    # (-x - x = -(x + x) and a - b = a + -b exactly: the order of PyTorch's operations)
    return np.where(x <= t(5.0), np.where(x < t(0.00001), small, mid), big)


def _bessel_j1(x):
    t = x.dtype.type
    a = np.abs(x)
    xx = a * a
    mid = _horner(xx, C.BESSEL_J1_RP) / _horner(xx, C.BESSEL_J1_RQ) * a * \
        (xx - t(1.46819706421238932572e+01)) * (xx - t(4.92184563216946036703e+01))
    big = _asymptotic(a, C.BESSEL_J1_PP, C.BESSEL_J1_PQ, C.BESSEL_J1_QP, C.BESSEL_J1_QQ,
                      t(5.0) / a * (t(5.0) / a), _3PI_4, _cos, _neg_sin)
    r = np.where(a <= t(5.0), mid, big)
    return np.where(x < t(0.0), -r, r)


def _bessel_y0(x):
    t = x.dtype.type
    xx = x * x
    mid = _fm(t(_TWO_OVER_PI) * _log(x), _bessel_j0(x),
              _horner(xx, C.BESSEL_Y0_YP) / _horner(xx, C.BESSEL_Y0_YQ))
    big = _asymptotic(x, C.BESSEL_J0_PP, C.BESSEL_J0_PQ, C.BESSEL_J0_QP, C.BESSEL_J0_QQ,
                      t(25.0) / xx, _PI_4, _sin, _cos)
    mid = np.where(x == 0, t(-np.inf), np.where(x < 0, t(np.nan), mid))
    return np.where(x <= t(5.0), mid, big)


def _bessel_y1(x):
    t = x.dtype.type
    xx = x * x
    mid = _fm(x, _horner(xx, C.BESSEL_Y1_YP) / _horner(xx, C.BESSEL_Y1_YQ),
              t(_TWO_OVER_PI) * _fm(_bessel_j1(x), _log(x), -(t(1.0) / x)))
    big = _asymptotic(x, C.BESSEL_J1_PP, C.BESSEL_J1_PQ, C.BESSEL_J1_QP, C.BESSEL_J1_QQ,
                      t(5.0) / x * (t(5.0) / x), _3PI_4, _sin, _cos)
    mid = np.where(x == 0, t(-np.inf), np.where(x < 0, t(np.nan), mid))
    return np.where(x <= t(5.0), mid, big)


def _i_series(a, low, high):
    """(the Chebyshev sum over [0, 8], over (8, inf)) of |x| = a, as PyTorch's I0/I1."""
    t = a.dtype.type
    return (_chbevl(a / t(2.0) - t(2.0), low), _chbevl(t(32.0) / a - t(2.0), high))


def _modified_bessel_i0(x):
    t = x.dtype.type
    a = np.abs(x)
    lo, hi = _i_series(a, C.MODIFIED_BESSEL_I0_A, C.MODIFIED_BESSEL_I0_B)
    e = _exp(a)
    return np.where(a <= t(8.0), e * lo, e * hi / np.sqrt(a))


def _modified_bessel_i1(x):
    t = x.dtype.type
    a = np.abs(x)
    lo, hi = _i_series(a, C.MODIFIED_BESSEL_I1_A, C.MODIFIED_BESSEL_I1_B)
    e = _exp(a)
    r = np.where(a <= t(8.0), lo * a * e, e * hi / np.sqrt(a))
    return np.where(x < t(0.0), -r, r)


def _k_series(x, low, high):
    t = x.dtype.type
    return (_chbevl(_fm(x, x, np.full_like(x, t(-2.0))), low),
            _chbevl(t(8.0) / x - t(2.0), high))


def _k_domain(x, r):
    t = x.dtype.type
    return np.where(x == 0, t(np.inf), np.where(x < 0, t(np.nan), r))


def _k0_small(x, lo):
    # (PyTorch's log(0.5 * x) there is a double: the difference is taken in float64)
    d = fma(-_log(0.5 * x.astype(np.float64)), _modified_bessel_i0(x).astype(np.float64),
            lo.astype(np.float64), np.float64)
    return d.astype(x.dtype)


def _modified_bessel_k0(x):
    t = x.dtype.type
    lo, hi = _k_series(x, C.MODIFIED_BESSEL_K0_A, C.MODIFIED_BESSEL_K0_B)
    return _k_domain(x, np.where(x <= t(2.0), _k0_small(x, lo),
                                 _exp(-x) * hi / np.sqrt(x)))


def _modified_bessel_k1(x):
    t = x.dtype.type
    lo, hi = _k_series(x, C.MODIFIED_BESSEL_K1_A, C.MODIFIED_BESSEL_K1_B)
    small = _fm(_log(t(0.5) * x), _modified_bessel_i1(x), lo / x)
    return _k_domain(x, np.where(x <= t(2.0), small, _exp(-x) * hi / np.sqrt(x)))


def _scaled_modified_bessel_k0(x):
    t = x.dtype.type
    lo, hi = _k_series(x, C.MODIFIED_BESSEL_K0_A, C.MODIFIED_BESSEL_K0_B)
    small = _fm(-_log(t(0.5) * x), _modified_bessel_i0(x), lo) * _exp(x)
    return _k_domain(x, np.where(x <= t(2.0), small, hi / np.sqrt(x)))


def _scaled_modified_bessel_k1(x):
    t = x.dtype.type
    lo, hi = _k_series(x, C.MODIFIED_BESSEL_K1_A, C.MODIFIED_BESSEL_K1_B)
    small = _fm(_log(t(0.5) * x), _modified_bessel_i1(x), lo / x) * _exp(x)
    return _k_domain(x, np.where(x <= t(2.0), small, hi / np.sqrt(x)))


def _spherical_bessel_j0(x):
    t = x.dtype.type
    xx = x * x
    c = [t(1.0) / t(6227020800.0), t(-1.0) / t(39916800.0), t(1.0) / t(362880.0),
         t(-1.0) / t(5040.0), t(1.0) / t(120.0), t(-1.0) / t(6.0)]
    s = np.full_like(x, c[0])
    for k in c[1:]:
        s = _fm(xx, s, np.full_like(x, k))
    small = _fm(xx, s, np.ones_like(x))
    r = np.where(np.abs(x) < t(0.5), small, _sin(x) / x)
    return np.where(np.isinf(x), t(0.0), r)


def _i1e_tables(dt):
    # (PyTorch's float32 I1 evaluates the last 17 and 7 terms of the float64 tables)
    if dt == np.float32:
        return C.MODIFIED_BESSEL_I1_A[-17:], C.MODIFIED_BESSEL_I1_B[-7:]
    return C.MODIFIED_BESSEL_I1_A, C.MODIFIED_BESSEL_I1_B


def _i0e(x):
    t = x.dtype.type
    a = np.abs(x)
    lo, hi = _i_series(a, C.MODIFIED_BESSEL_I0_A, C.MODIFIED_BESSEL_I0_B)
    return np.where(a <= t(8.0), lo, hi / np.sqrt(a))


def _i1(x):
    t = x.dtype.type
    a = np.abs(x)
    lo, hi = _i_series(a, *_i1e_tables(x.dtype))
    e = _exp(a)
    r = np.where(a <= t(8.0), e * a * lo, e * hi / np.sqrt(a))
    return np.where(x < t(0.0), -r, r)


def _i1e(x):
    t = x.dtype.type
    a = np.abs(x)
    lo, hi = _i_series(a, *_i1e_tables(x.dtype))
    r = np.where(a <= t(8.0), lo * a, hi / np.sqrt(a))
    return np.where(x < t(0.0), -r, r)


BESSEL = {"airy_ai": _airy_ai, "bessel_j0": _bessel_j0, "bessel_j1": _bessel_j1,
          "bessel_y0": _bessel_y0, "bessel_y1": _bessel_y1,
          "modified_bessel_i0": _modified_bessel_i0, "modified_bessel_i1": _modified_bessel_i1,
          "modified_bessel_k0": _modified_bessel_k0, "modified_bessel_k1": _modified_bessel_k1,
          "scaled_modified_bessel_k0": _scaled_modified_bessel_k0,
          "scaled_modified_bessel_k1": _scaled_modified_bessel_k1,
          "spherical_bessel_j0": _spherical_bessel_j0}
SCALED_I = {"i0": _modified_bessel_i0, "i0e": _i0e, "i1": _i1, "i1e": _i1e}


def np_bessel(x, fn):
    """torch.special.<fn>(x) of a float array x (fn a key of BESSEL or SCALED_I): float16
    is evaluated in float32 (PyTorch's i0e / i1 / i1e on half)."""
    x = np.asarray(x)
    dt = x.dtype if x.dtype.kind == "f" else np.dtype(np.float32)
    work = np.asarray(x, np.float32 if dt.itemsize < 4 else dt).reshape(-1)
    with np.errstate(all="ignore"):
        return (BESSEL.get(fn) or SCALED_I[fn])(work).astype(dt, copy=False).reshape(x.shape)
