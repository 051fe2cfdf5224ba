"""erf as llgrad computes it, eagerly (np_erf, NumPy) and in native code (codegen's
vecmath.erf), with no SciPy (whose import alone costs ~0.5 s).

float64: a Taylor polynomial around the nearest of 13 centres, accurate to a couple of ulps
of float64 (native float64 erf evaluates the same table).

float32 has methods of its own (the table's gathers made eager GELU half of a transformer
block's time, and its float64 polynomial a fifth of the compiled one's).
Eager (_np_erf32) evaluates in float64, rounded once: |x| < 1: x P(x^2), P of degree 7
(_erf_near64); 1 <= |x| < 4: 1 - e^(-x^2) G(t), t = (|x| - 2.5) / 1.5, G of degree 11 the
truncated Chebyshev interpolant (64 nodes, values in 60-digit arithmetic) of e^(x^2) erfc(x)
(erf32_tail); |x| >= 4: +-1.
Native code evaluates in float32 arithmetic with fused multiply-adds, in the fewest
operations found that stay within an ulp (vecmath._erf32, ~50 per element where the method
eager uses would take ~65): |x| < 0.875: x + x q(x^2), q of degree 6; 0.875 <= |x| < 3.9375:
1 - e^p(|x|), p of degree 8 fitted to log(erfc(|x|)) (p's rounding needs no compensation: its
error is scaled by erfc, small where |p| is large); beyond, +-1. q and p are Chebyshev least
squares fits (400 nodes, math.erf / math.erfc values) rounded to float32: ERF32_NATIVE_NEAR,
ERF32_NATIVE_FAR.
Both are within 1 ulp of the correctly rounded value (1-4% of inputs are one ulp off), as
PyTorch's own float32 erf (SLEEF's 1-ulp erf) and as native exp and tanh stand to NumPy's."""
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
    """erf of a float array, NaN kept, +-0 kept, erf(+-inf) = +-1 (float32: _np_erf32)."""
    x = np.asarray(x)
    if x.dtype == np.float16:       # (PyTorch: in float32, rounded once to float16)
        return _np_erf32(x.astype(np.float32)).astype(np.float16)
    dt = np.result_type(x, np.float32)
    if dt == np.float32:
        return _np_erf32(x)
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


ERF32_TAIL_DEGREE = 11          # G's degree (1 <= |x| < 4)
# native float32 erf (see the module): q and p, highest degree first, and where each applies
ERF32_NATIVE_SPLIT, ERF32_NATIVE_ONE = 0.875, 3.9375
ERF32_NATIVE_NEAR = tuple(float.fromhex(h) for h in (
    "0x1.6cae48p-14", "-0x1.aebb6p-11", "0x1.554138p-8", "-0x1.b81a4ep-6", "0x1.ce2e8cp-4",
    "-0x1.812744p-2", "0x1.06eba8p-3"))
ERF32_NATIVE_FAR = tuple(float.fromhex(h) for h in (
    "0x1.b301eep-20", "-0x1.7f5344p-15", "0x1.372578p-11", "-0x1.36cf12p-8", "0x1.b006acp-6",
    "-0x1.c27b44p-4", "-0x1.438d86p-1", "-0x1.215258p+0", "0x1.3c4082p-12"))
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


def erf32_tail():
    """G, eager float32 erf's tail polynomial, lowest degree first (see the module)."""
    if not _ERF32:
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
        _ERF32.extend(float(v) for v in tail)
    return list(_ERF32)


_ERF32_CHUNK = 16384        # elements per pass: the Horner steps' float64 arrays stay in L2


_ERF_NEAR64 = []


def _erf_near64():
    """P, highest degree first, with erf(x) = x P(x^2) within 3.7e-11 for |x| < 1: the
    Chebyshev interpolant of degree 7 in u = x^2 on [0, 1] (64 nodes, math.erf's values)."""
    if not _ERF_NEAR64:
        nodes = 64
        u = 0.5 + 0.5 * np.cos((np.arange(nodes) + 0.5) * np.pi / nodes)
        values = [math.erf(math.sqrt(v)) / math.sqrt(v) for v in u]
        cheb = np.polynomial.chebyshev.chebfit(2 * u - 1, values, 7)
        in_u = np.polynomial.Polynomial(np.polynomial.chebyshev.cheb2poly(cheb))(
            np.polynomial.Polynomial([-1.0, 2.0]))
        _ERF_NEAR64.extend(float(c) for c in in_u.coef[::-1])
    return _ERF_NEAR64


def _np_erf32(x):
    """float32 erf in float64, rounded once (the module's float32 method, with _erf_near64
    below 1). The tail is computed only for the elements that need it (|x| >= 1)."""
    near_p, tail = _erf_near64(), erf32_tail()[::-1]
    flat = np.ascontiguousarray(x, dtype=np.float32).reshape(-1)
    out = np.empty(flat.shape, np.float32)
    for start in range(0, flat.size, _ERF32_CHUNK):
        v = flat[start:start + _ERF32_CHUNK]
        x64 = v.astype(np.float64)
        u = x64 * x64
        acc = np.full(u.shape, near_p[0])
        for c in near_p[1:]:
            np.multiply(acc, u, out=acc)
            np.add(acc, c, out=acc)
        np.multiply(acc, x64, out=acc)                          # x P(x^2)
        far = np.flatnonzero(~(np.abs(v) < 1.0))                # (NaN too: fixed below)
        if far.size:
            a = np.minimum(np.abs(x64[far]), 4.0)
            t = (a - 2.5) * (1 / 1.5)
            g = np.full(t.shape, tail[0])
            for c in tail[1:]:
                np.multiply(g, t, out=g)
                np.add(g, c, out=g)
            r = 1.0 - np.exp(-(a * a)) * g
            r[a >= 4.0] = 1.0
            acc[far] = np.copysign(r, x64[far])
            nan = np.isnan(v[far])
            if nan.any():
                acc[far[nan]] = x64[far[nan]]
        out[start:start + _ERF32_CHUNK] = acc
    return out.reshape(np.shape(x))
