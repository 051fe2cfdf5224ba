"""Special functions written once, against an arithmetic `m` on float64 values, so that eager
(special_numpy.py: m on NumPy arrays) and native code (codegen's vecmath_special.py: m on
LLVM IR, straight-line, vectorisable) evaluate the same method: asin, acos, atan, atan2,
erfc, erfinv, lgamma, digamma, trigamma. float32 is evaluated in float64 and rounded once.

`m` has: c(v) (a constant), add sub mul div neg abs sqrt fma (a*b+c, fused or not),
two_prod(a, b) -> (a*b rounded, its exact error), the ordered compares lt le gt ge eq (false
at NaN), and_ or_ not_, select(mask, a, b), isnan, copysign, signbit, rint, floor, exp, log,
log1p, erf; horner(x, coeffs, highest first); index_bits(x, lo_exp, sub, n): the row of x
among 2^sub equal rows per octave from 2^lo_exp (from its bits; clamped to [0, n)),
index_float(v, offset, n): offset + floor(v) clamped to [0, n) (0 at NaN); select on those
indices; gather(name, values, j) and table(name, rows, j, t): row j's polynomial (lowest
degree first) at t.

The methods (coefficients: special_tables*.py, fitted by tools/gen_special_tables.py):
  atan    reduced to |v| <= tan(pi/8) by v = (|x| - 1)/(|x| + 1) (+pi/4) or -1/|x| (+pi/2);
          atan(v) = v + v z P(z), z = v^2, the constants added as hi + lo.
  atan2   atan of min/max of |y|, |x| (inf/inf: 1; 0/0: 0), reflected into the quadrant
          (pi/2 - r when |y| > |x|, pi - r when x's sign bit is set), with y's sign.
  asin    |x| <= 1/2: x + x z R(z); above: pi/2 - 2 asin(s), s = sqrt((1 - |x|)/2) with its
          rounding error (two_prod) carried. acos from the same pieces.
  erfc    x < 1/2: 1 - erf(x); up to 27.3: exp(-x^2) G(x), x^2 split exactly (two_prod) so
          the exponential is of the exact square, G from a table of 12 rows; beyond: 0.
  erfinv  w = -log(1 - x^2) (log1p below 1/2); erfinv = x P(w) for w < 6.25, x P(sqrt(w))
          above (13 rows); +-inf at +-1, NaN beyond.
  lgamma  |x| < 1/2: -log|x| + x P(x); [1/2, 16): (x - 1)(x - 2) P(x) (20 rows: relative
          accuracy at the roots 1 and 2); 16 and above: Stirling's series; x <= -1/2:
          log(pi / (|sin(pi x)| |x|)) - lgamma(|x|) (inf at the poles).
  digamma |x| < 1/2: P(x) - 1/x (so -inf at +0, inf at -0, as PyTorch); [1/2, 16):
          (x - x0) P(x), x0 the root; above: log x - 1/(2x) - sum B2k / (2k x^2k);
          x <= -1/2: digamma(|x|) + 1/|x| - pi cot(pi x) (NaN at the poles, as PyTorch).
  trigamma likewise: P(x) + 1/x^2; P(x); 1/x + 1/(2x^2) + sum B2k / x^(2k+1);
          pi^2 / sin^2(pi x) - trigamma(|x|) + 1/x^2 (inf at the poles).
sin(pi r) and cos(pi r) for |r| <= 1/2, r = x - rint(x) exactly, by polynomials in r^2."""
import math
from fractions import Fraction

from . import special_tables as T
from . import special_tables_psi as TP

_PIO2_HI, _PIO2_LO = 1.5707963267948966, 6.123233995736766e-17
_PIO4_HI, _PIO4_LO = 0.7853981633974483, 3.061616997868383e-17
_PI_HI, _PI_LO = 3.141592653589793, 1.2246467991473532e-16
_TAN_PI_8 = 0.41421356237309503
_TAN_3PI_8 = 2.414213562373095
_INF, _NAN = math.inf, math.nan


def _rev(coeffs):
    return tuple(reversed(coeffs))


_ATAN_P, _ASIN_R = _rev(T.ATAN_P), _rev(T.ASIN_R)
_SINPI, _COSPI = _rev(T.SINPI_S), _rev(T.COSPI_C)


def _bernoulli(n):
    """B_0..B_n as Fractions (B_1 = -1/2)."""
    b = [Fraction(0)] * (n + 1)
    for m in range(n + 1):
        a = [Fraction(0)] * (m + 1)
        for j in range(m + 1):
            a[j] = Fraction(1, j + 1)
        for j in range(m, 0, -1):
            for i in range(j):
                a[i] = (i + 1) * (a[i] - a[i + 1])
        b[m] = a[0]
    b[1] = -b[1]
    return b


_B = _bernoulli(16)
# the asymptotic series, highest power of z = 1/x^2 first
_STIRLING = _rev([float(_B[2 * k] / (2 * k * (2 * k - 1))) for k in range(1, 7)])
_PSI_SERIES = _rev([float(_B[2 * k] / (2 * k)) for k in range(1, 8)])
_PSI1_SERIES = _rev([float(_B[2 * k]) for k in range(1, 9)])
_HALF_LOG_2PI_M_HALF = 0.5 * math.log(2 * math.pi) - 0.5
_LOG_PI = math.log(math.pi)


# ---- the inverse trigonometric functions ---------------------------------------------------

def _atan_small(m, v):
    """atan(v) for |v| <= tan(pi/8)."""
    z = m.mul(v, v)
    return m.fma(m.mul(v, z), m.horner(z, _ATAN_P), v)


def _atan_reduced(m, t):
    """atan(t) for t in [0, 1] (a NaN-free t)."""
    mid = m.gt(t, m.c(_TAN_PI_8))
    v = m.select(mid, m.div(m.sub(t, m.c(1.0)), m.add(t, m.c(1.0))), t)
    lo = m.add(m.select(mid, m.c(_PIO4_LO), m.c(0.0)), _atan_small(m, v))
    return m.add(m.select(mid, m.c(_PIO4_HI), m.c(0.0)), lo)


def atan(m, x):
    ax = m.abs(x)
    big = m.gt(ax, m.c(_TAN_3PI_8))
    mid = m.gt(ax, m.c(_TAN_PI_8))
    v = m.select(big, m.div(m.c(-1.0), ax),
                 m.select(mid, m.div(m.sub(ax, m.c(1.0)), m.add(ax, m.c(1.0))), ax))
    hi = m.select(big, m.c(_PIO2_HI), m.select(mid, m.c(_PIO4_HI), m.c(0.0)))
    lo = m.select(big, m.c(_PIO2_LO), m.select(mid, m.c(_PIO4_LO), m.c(0.0)))
    return m.copysign(m.add(hi, m.add(lo, _atan_small(m, v))), x)


def atan2(m, y, x):
    ax, ay = m.abs(x), m.abs(y)
    swap = m.gt(ay, ax)
    a, b = m.select(swap, ax, ay), m.select(swap, ay, ax)
    t = m.div(a, b)
    inf = m.c(_INF)
    t = m.select(m.and_(m.eq(ax, inf), m.eq(ay, inf)), m.c(1.0),
                 m.select(m.eq(b, m.c(0.0)), m.c(0.0), t))
    t = m.select(m.isnan(t), m.c(0.0), t)
    r = _atan_reduced(m, t)
    # the quadrant: r, pi/2 - r, pi - r, or pi - (pi/2 - r) = pi/2 + r, each as
    # (hi +- r) + lo so that the constants' low parts are added once
    neg = m.signbit(x)
    hi = m.select(swap, m.c(_PIO2_HI), m.select(neg, m.c(_PI_HI), m.c(0.0)))
    lo = m.select(swap, m.c(_PIO2_LO), m.select(neg, m.c(_PI_LO), m.c(0.0)))
    flip = m.and_(m.or_(swap, neg), m.not_(m.and_(swap, neg)))      # swap xor neg: - r
    r = m.add(m.add(hi, m.select(flip, m.neg(r), r)), lo)
    r = m.copysign(r, y)
    return m.select(m.or_(m.isnan(x), m.isnan(y)), m.add(x, y), r)


def _asin_parts(m, x):
    """(|x|, asin(|x|) for |x| <= 1/2, and s + e: asin(s) = s + e with s = sqrt((1 - |x|)/2),
    e holding s's rounding error and the series)."""
    ax = m.abs(x)
    z = m.mul(ax, ax)
    small = m.fma(m.mul(ax, z), m.horner(z, _ASIN_R), ax)
    w = m.mul(m.sub(m.c(1.0), ax), m.c(0.5))
    s = m.sqrt(w)
    hi, lo = m.two_prod(s, s)
    ds = m.div(m.sub(m.sub(w, hi), lo), m.add(s, s))
    ds = m.select(m.gt(s, m.c(0.0)), ds, m.c(0.0))
    e = m.fma(m.mul(s, w), m.horner(w, _ASIN_R), ds)
    return ax, small, s, e


def asin(m, x):
    ax, small, s, e = _asin_parts(m, x)
    two_s = m.add(s, s)
    big = m.add(m.sub(m.c(_PIO2_HI), two_s), m.sub(m.c(_PIO2_LO), m.add(e, e)))
    return m.copysign(m.select(m.le(ax, m.c(0.5)), small, big), x)


def acos(m, x):
    ax, small, s, e = _asin_parts(m, x)
    two_s = m.add(s, s)
    mid = m.add(m.c(_PIO2_HI), m.sub(m.c(_PIO2_LO), m.copysign(small, x)))
    pos = m.add(two_s, m.add(e, e))
    neg = m.add(m.sub(m.c(_PI_HI), two_s), m.sub(m.c(_PI_LO), m.add(e, e)))
    r = m.select(m.gt(x, m.c(0.5)), pos, neg)
    return m.select(m.le(ax, m.c(0.5)), mid, m.select(m.isnan(x), x, r))


# ---- erfc, erfinv ---------------------------------------------------------------------------

_ERFC_END = 27.3                    # erfc rounds to 0 beyond (float64)


def erfc(m, x):
    small = m.lt(x, m.c(0.5))
    near = m.sub(m.c(1.0), m.erf(x))
    xc = m.select(m.lt(x, m.c(_ERFC_END)), x, m.c(_ERFC_END))
    j = m.index_bits(xc, -1, 1, len(T.ERFC_G))
    g = m.table("erfc_g", T.ERFC_G, j, m.sub(xc, m.gather("erfc_c", T.ERFC_G_CENTRES, j)))
    x2, err = m.two_prod(xc, xc)
    e = m.exp(m.neg(x2))
    far = m.mul(m.fma(e, m.neg(err), e), g)          # e^(-x^2) = e^(-x2) (1 - err)
    r = m.select(small, near, m.select(m.lt(x, m.c(_ERFC_END)), far, m.c(0.0)))
    return m.select(m.isnan(x), x, r)


def erfinv(m, x):
    ax = m.abs(x)
    one = m.c(1.0)
    w = m.select(m.lt(ax, m.c(0.5)), m.neg(m.log1p(m.neg(m.mul(ax, ax)))),
                 m.neg(m.log(m.mul(m.sub(one, ax), m.add(one, ax)))))
    w = m.select(m.isnan(w), m.c(0.0), w)
    s = m.sqrt(w)
    low = m.lt(w, m.c(6.25))
    j = m.select(low, m.index_float(m.mul(w, m.c(0.8)), 0, 5),
                 m.index_float(m.mul(m.sub(s, m.c(2.5)), m.c(2.0)), 5, 8))
    v = m.select(low, w, s)
    p = m.table("erfinv", T.ERFINV, j, m.sub(v, m.gather("erfinv_c", T.ERFINV_CENTRES, j)))
    r = m.select(m.eq(ax, one), m.copysign(m.c(_INF), x), m.mul(x, p))
    return m.select(m.or_(m.gt(ax, one), m.isnan(x)), m.c(_NAN), r)


# ---- lgamma, digamma, trigamma --------------------------------------------------------------

def _small(m, name, rows, centres, x):
    """A table over [-0.5, 0.5) in four rows, at x."""
    j = m.index_float(m.mul(m.add(x, m.c(0.5)), m.c(4.0)), 0, 4)
    return m.table(name, rows, j, m.sub(x, m.gather(name + "_c", centres, j)))


def _mid(m, name, rows, centres, y):
    """A table over [0.5, 16) in four rows per octave, at y."""
    j = m.index_bits(y, -1, 2, 20)
    return m.table(name, rows, j, m.sub(y, m.gather(name + "_c", centres, j)))


def _sinpi_cospi(m, x):
    """(|sin(pi x)|, sin(pi r), cos(pi r)) with r = x - rint(x) (NaN at +-inf)."""
    r = m.sub(x, m.rint(x))
    z = m.mul(r, r)
    s = m.mul(r, m.horner(z, _SINPI))
    return m.abs(s), s, m.horner(z, _COSPI)


def _clamp_up(m, y, lo):
    return m.select(m.ge(y, m.c(lo)), y, m.c(lo))


def _lgamma_pos(m, y):
    """lgamma(y) for y >= 0.5 (finite or +inf)."""
    one = m.c(1.0)
    mid = m.mul(m.mul(m.sub(y, one), m.sub(y, m.c(2.0))),
                _mid(m, "lgamma_mid", T.LGAMMA_MID, T.LGAMMA_MID_CENTRES, y))
    mid = m.add(mid, m.c(0.0))          # (lgamma(1) is +0, not (1 - 1) * -1 * ... = -0)
    yb = _clamp_up(m, y, 16.0)
    z = m.div(one, m.mul(yb, yb))
    corr = m.add(m.c(_HALF_LOG_2PI_M_HALF), m.div(m.horner(z, _STIRLING), yb))
    big = m.add(m.mul(m.sub(yb, m.c(0.5)), m.sub(m.log(yb), one)), corr)
    return m.select(m.lt(y, m.c(16.0)), mid, big)


def lgamma(m, x):
    ax = m.abs(x)
    small = m.sub(m.mul(x, _small(m, "lgamma_small", T.LGAMMA_SMALL, T.LGAMMA_SMALL_CENTRES, x)),
                  m.log(ax))
    y = _clamp_up(m, ax, 0.5)
    pos = _lgamma_pos(m, y)
    sp, _, _ = _sinpi_cospi(m, x)
    neg = m.sub(m.log(m.div(m.c(math.pi), m.mul(sp, y))), pos)
    neg = m.select(m.eq(sp, m.c(0.0)), m.c(_INF), neg)
    r = m.select(m.lt(ax, m.c(0.5)), small, m.select(m.gt(x, m.c(0.0)), pos, neg))
    r = m.select(m.eq(ax, m.c(_INF)), m.c(_INF), r)
    return m.select(m.isnan(x), x, r)


def _digamma_pos(m, y):
    x0h, x0l = TP.DIGAMMA_ROOT
    mid = m.mul(m.sub(m.sub(y, m.c(x0h)), m.c(x0l)),
                _mid(m, "digamma_mid", TP.DIGAMMA_MID, TP.DIGAMMA_MID_CENTRES, y))
    yb = _clamp_up(m, y, 16.0)
    z = m.div(m.c(1.0), m.mul(yb, yb))
    big = m.sub(m.sub(m.log(yb), m.div(m.c(0.5), yb)), m.mul(z, m.horner(z, _PSI_SERIES)))
    return m.select(m.lt(y, m.c(16.0)), mid, big)


def digamma(m, x):
    ax = m.abs(x)
    small = m.sub(_small(m, "digamma_small", TP.DIGAMMA_SMALL, TP.DIGAMMA_SMALL_CENTRES, x),
                  m.div(m.c(1.0), x))
    y = _clamp_up(m, ax, 0.5)
    pos = _digamma_pos(m, y)
    sp, s, c = _sinpi_cospi(m, x)
    neg = m.sub(m.add(pos, m.div(m.c(1.0), y)), m.div(m.mul(m.c(math.pi), c), s))
    neg = m.select(m.eq(sp, m.c(0.0)), m.c(_NAN), neg)
    r = m.select(m.lt(ax, m.c(0.5)), small, m.select(m.gt(x, m.c(0.0)), pos, neg))
    return m.select(m.isnan(x), x, r)


def _trigamma_pos(m, y):
    mid = _mid(m, "trigamma_mid", TP.TRIGAMMA_MID, TP.TRIGAMMA_MID_CENTRES, y)
    yb = _clamp_up(m, y, 16.0)
    u = m.div(m.c(1.0), yb)
    z = m.mul(u, u)
    big = m.add(u, m.mul(z, m.fma(u, m.horner(z, _PSI1_SERIES), m.c(0.5))))
    return m.select(m.lt(y, m.c(16.0)), mid, big)


def trigamma(m, x):
    ax = m.abs(x)
    small = m.add(_small(m, "trigamma_small", TP.TRIGAMMA_SMALL, TP.TRIGAMMA_SMALL_CENTRES, x),
                  m.div(m.c(1.0), m.mul(x, x)))
    y = _clamp_up(m, ax, 0.5)
    pos = _trigamma_pos(m, y)
    sp, _, _ = _sinpi_cospi(m, x)
    neg = m.add(m.sub(m.div(m.c(math.pi * math.pi), m.mul(sp, sp)), pos),
                m.div(m.c(1.0), m.mul(y, y)))
    r = m.select(m.lt(ax, m.c(0.5)), small, m.select(m.gt(x, m.c(0.0)), pos, neg))
    return m.select(m.isnan(x), x, r)


KERNELS = {"asin": asin, "acos": acos, "atan": atan, "erfc": erfc, "erfinv": erfinv,
           "lgamma": lgamma, "digamma": digamma, "trigamma": trigamma}
