"""The float32 log and sin/cos that PyTorch's CPU normal_ uses for 16+ contiguous values
(ATen's normal_fill_16_AVX2 over avx_mathfun: Cephes polynomials on eight lanes), with the
fused multiply-adds its compiler forms from them, so llgrad's float32 randn / normal_ give
PyTorch's bits. NumPy's own log / sin / cos are an ulp away from these in ~15% of draws.

Each step rounds to float32 as the vector instruction does (float32 values are carried in
float64, where a product of two is exact); where the source multiplies and then adds, the
pair is one FMA, the multiplication fused being the one GCC contracts (checked value for
value against PyTorch's draws)."""
import numpy as np

_F = np.float32
_LOG_P = tuple(_F(c) for c in (7.0376836292E-2, -1.1514610310E-1, 1.1676998740E-1,
                               -1.2420140846E-1, 1.4249322787E-1, -1.6668057665E-1,
                               2.0000714765E-1, -2.4999993993E-1, 3.3333331174E-1))
_LOG_Q1, _LOG_Q2 = _F(-2.12194440e-4), _F(0.693359375)
_SQRTHF = _F(0.707106781186547524)
_MIN_NORM = np.array([0x00800000], np.int32).view(_F)[0]
_FOPI = _F(1.27323954473516)            # 4 / pi
_DP = (_F(-0.78515625), _F(-2.4187564849853515625e-4), _F(-3.77489497744594108e-8))
_COS_P = (_F(2.443315711809948E-005), _F(-1.388731625493765E-003), _F(4.166664568298827E-002))
_SIN_P = (_F(-1.9515295891E-4), _F(8.3321608736E-3), _F(-1.6666654611E-1))
_HALF, _ONE = _F(0.5), _F(1.0)


def _r(x):
    """float64 x rounded to float32 (kept as float64: products of two such values are exact)."""
    return x.astype(_F).astype(np.float64)


def _fma(a, b, c):
    # (a * b exact in float64, the sum rounded there and again to float32: the two roundings
    # differ from one only for a sum within 2**-53 of a float32 tie, ~1 in 2**29 draws)
    return _r(a * b + c)


def log_ps(x):
    """avx_mathfun's log256_ps of a float32 array (NaN for x <= 0)."""
    x = np.asarray(x, _F)
    invalid = ~(x > 0)
    bits = np.maximum(x, _MIN_NORM).view(np.int32)
    e = ((bits >> 23) - 0x7f).astype(np.float64) + 1.0
    m = ((bits & ~0x7f800000) | 0x3f000000).view(_F)          # the mantissa in [0.5, 1)
    small = m < _SQRTHF
    e = e - small
    m = m.astype(np.float64)
    x = _r((m - 1.0) + np.where(small, m, 0.0))     # (m - 1 is exact)
    z = _r(x * x)
    y = np.full(x.shape, _LOG_P[0], np.float64)
    for p in _LOG_P[1:]:
        y = _fma(y, x, float(p))
    y = _fma(_r(y * x), z, _r(e * float(_LOG_Q1)))
    y = _fma(z, -0.5, y)
    x = (e * float(_LOG_Q2) + _r(x + y)).astype(_F)   # (e * Q2 is exact: Q2 has 9 bits)
    return np.where(invalid, _F(np.nan), x)


def sincos_ps(x):
    """avx_mathfun's sincos256_ps of a float32 array: (sin, cos)."""
    x = np.asarray(x, _F)
    neg = np.signbit(x)
    x = np.abs(x)
    j = ((x * _FOPI).astype(np.int32) + 1) & ~1
    y = j.astype(np.float64)
    x = x.astype(np.float64)
    for dp in _DP:                      # (x - y * pi / 4 in three parts)
        x = _fma(y, float(dp), x)
    sin_neg = neg ^ ((j & 4) != 0)
    cos_neg = (~(j - 2) & 4) != 0
    first = (j & 2) == 0                # (sin from the sine polynomial, cos from the cosine)
    z = _r(x * x)
    c0, c1, c2 = (float(c) for c in _COS_P)
    s0, s1, s2 = (float(c) for c in _SIN_P)
    yc = _fma(_fma(np.full(x.shape, c0), z, c1), z, c2)
    yc = _r(_fma(_r(yc * z), z, -_r(z * 0.5)) + 1.0)
    ys = _fma(_fma(np.full(x.shape, s0), z, s1), z, s2)
    ys = _fma(_r(ys * z), x, x)
    s, c = np.where(first, ys, yc).astype(_F), np.where(first, yc, ys).astype(_F)
    return np.where(sin_neg, -s, s), np.where(cos_neg, -c, c)
