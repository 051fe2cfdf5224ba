"""erf as llgrad computes it, eagerly (np_erf, NumPy) and in native code (codegen's
vecmath.erf, the same method and table): a Taylor polynomial around the nearest of 13
centres, accurate to a couple of ulps of float64 and correctly rounded float32 in tests,
with no SciPy (whose import alone costs ~0.5 s).

Native float32 erf has a method of its own in float32 arithmetic (erf32_coefficients; the
table's float64 polynomial made GELU a fifth of a transformer block's time): |x| < 1:
erf(x) = x + x q(x^2), q the first 10 terms of erf(x)/x - 1's Taylor series; 1 <= |x| < 4:
erf(x) = 1 - e^(-x^2) G(t), t = (|x| - 2.5) / 1.5, G of degree 11 the truncated Chebyshev
interpolant (64 nodes, values in 60-digit arithmetic) of e^(x^2) erfc(x); |x| >= 4: +-1.
At most 1 ulp from the correctly rounded value (2.5% of float32 inputs differ by one),
as native exp and tanh stand to NumPy's."""
import math
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np

# erf(|x|) by a Taylor polynomial around the nearest centre c = j/2 (|t| = ||x| - c| <= 1/4,
# t exact), coefficients erf^(k)(c)/k! computed once in 50-digit arithmetic:
# erf'(x) = 2/sqrt(pi) e^{-x^2}, erf^(k)(x) = 2/sqrt(pi) (-1)^(k-1) H_{k-1}(x) e^{-x^2}
# (physicists' Hermite), erf(c) itself by the positive series
# 2/sqrt(pi) e^{-c^2} sum 2^n c^(2n+1) / (1*3*...*(2n+1)). The truncation error is below
# 1.2 (0.354)^n / sqrt(n!) (Cramer's bound on Hermite functions): degree 21 for float64;
# float32 is evaluated in float64 at degree 12 and rounded once. Beyond the last centre
# erf rounds to +-1. The coefficients are one constant table, read with a gather.
ERF_CENTRES = 13             # c = 0, 0.5, ..., 6
ERF_DEGREE = {"float32": 12, "float64": 21}


def _coefficients(deg):
    with localcontext() as ctx:
        ctx.prec = 50
        two_rsqrt_pi = 2 / Decimal("3.14159265358979323846264338327950288419716939937510").sqrt()
        rows = []
        for j in range(ERF_CENTRES):
            c = Fraction(j, 2)
            cd = Decimal(c.numerator) / Decimal(c.denominator)
            g = two_rsqrt_pi * (-cd * cd).exp()
            # erf(c)
            term, total, n = cd, Decimal(0), 0
            while True:
                total += term
                n += 1
                term = term * 2 * cd * cd / (2 * n + 1)
                if term < Decimal(10) ** -45 and n > 2:
                    break
            row = [float(g * total)]
            h_prev, h = Fraction(0), Fraction(1)                # H_{-1}, H_0
            fact = 1
            for k in range(1, deg + 1):
                fact *= k
                hk = h                                          # H_{k-1}
                sign = 1 if k % 2 == 1 else -1
                row.append(float(g * sign * Decimal(hk.numerator) / Decimal(hk.denominator)
                                 / fact))
                h_prev, h = h, 2 * c * h - 2 * (k - 1) * h_prev   # H_k
            rows.append(row)
        return rows


_TABLES = {}
_CHUNK = 8192               # elements per pass: the Horner steps' arrays stay in cache


def erf_coefficients(deg):
    """[[erf(c), erf'(c), erf''(c)/2!, ...] for each centre c]: degree deg, lowest first."""
    rows = _TABLES.get(deg)
    if rows is None:
        rows = _TABLES[deg] = _coefficients(deg)
    return rows


_COLUMNS = {}


def _columns(deg):
    """The table as deg + 1 arrays, highest degree first, indexed by centre."""
    cols = _COLUMNS.get(deg)
    if cols is None:
        table = np.array(erf_coefficients(deg), dtype=np.float64)
        cols = _COLUMNS[deg] = [np.ascontiguousarray(table[:, k]) for k in range(deg, -1, -1)]
    return cols


def np_erf(x):
    """erf of a float array (float32 evaluated in float64 at the float32 degree, rounded
    once), NaN kept, +-0 kept, erf(+-inf) = +-1."""
    x = np.asarray(x)
    dt = np.result_type(x, np.float32)
    cols = _columns(ERF_DEGREE.get(np.dtype(dt).name, ERF_DEGREE["float64"]))
    last = (ERF_CENTRES - 1) / 2
    flat = x.reshape(-1)
    out = np.empty(flat.shape, np.float64)
    for start in range(0, flat.size, _CHUNK):
        v = flat[start:start + _CHUNK].astype(np.float64)
        ax = np.abs(v)
        nan = np.isnan(v)
        safe = np.minimum(ax, last)
        safe[nan] = last
        j = np.rint(safe * 2).astype(np.intp)
        t = safe - j * 0.5
        acc = cols[0].take(j)
        for col in cols[1:]:
            np.multiply(acc, t, out=acc)
            np.add(acc, col.take(j), out=acc)
        acc[ax >= last] = 1.0
        np.copysign(acc, v, out=acc)
        acc[nan] = v[nan]
        out[start:start + _CHUNK] = acc
    return out.reshape(x.shape).astype(dt, copy=False)


ERF32_NEAR_TERMS = 10           # q's terms (|x| < 1)
ERF32_TAIL_DEGREE = 11          # G's degree (1 <= |x| < 4)
_ERF32 = []
_PI = "3.14159265358979323846264338327950288419716939937510582097494459"


def _erf_decimal(x, prec=60):
    """erf(x) for a Decimal x in [0, 4] by its Taylor series at 0, in prec digits."""
    with localcontext() as ctx:
        ctx.prec = prec
        term, total, n = x, Decimal(0), 0
        while True:
            total += term / (2 * n + 1)
            n += 1
            term = -term * x * x / n
            if abs(term) < Decimal(10) ** -(prec - 5) and n > 2:
                return 2 / Decimal(_PI).sqrt() * total


def erf32_coefficients():
    """(q, G): native float32 erf's polynomials, lowest degree first (see the module)."""
    if not _ERF32:
        two_rsqrt_pi = 2 / math.sqrt(math.pi)
        near = [two_rsqrt_pi * (-1) ** n / (math.factorial(n) * (2 * n + 1))
                for n in range(ERF32_NEAR_TERMS)]
        near[0] -= 1.0
        nodes = 64
        theta = (np.arange(nodes) + 0.5) * np.pi / nodes
        values = []
        for x in 2.5 + 1.5 * np.cos(theta):
            xd = Decimal(float(x))
            with localcontext() as ctx:
                ctx.prec = 60
                values.append(float((1 - _erf_decimal(xd)) * (xd * xd).exp()))
        values = np.array(values)
        cheb = np.array([2.0 / nodes * np.dot(values, np.cos(k * theta))
                         for k in range(ERF32_TAIL_DEGREE + 1)])
        cheb[0] /= 2
        tail = np.polynomial.chebyshev.cheb2poly(cheb)
        _ERF32.extend([near, [float(v) for v in tail]])
    return _ERF32[0], _ERF32[1]
