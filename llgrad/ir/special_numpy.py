"""The special functions on NumPy arrays, as the op table's implementations (eager and the IR
interpreter): special_kernels.py's methods on an arithmetic of float64 arrays (float32
inputs evaluated in float64 and rounded once), and polygamma of order n >= 2 as
(-1)^(n+1) n! zeta(n + 1, x) by the Euler-Maclaurin summation of Cephes' zeta (the method
PyTorch's CPU kernel runs, special values included)."""
import math

import numpy as np

from . import special_kernels as K
from .erf_table import np_erf

_SPLIT = 134217729.0            # 2^27 + 1: Veltkamp's split of a double into halves


class NumpyMath:
    """special_kernels' arithmetic on float64 arrays (masks: bool arrays; indices: int64)."""

    c = staticmethod(np.float64)
    add, sub, mul, div = np.add, np.subtract, np.multiply, np.true_divide
    neg, abs, sqrt = np.negative, np.abs, np.sqrt
    lt, le, gt, ge, eq = np.less, np.less_equal, np.greater, np.greater_equal, np.equal
    and_, or_, not_ = np.logical_and, np.logical_or, np.logical_not
    isnan, copysign, signbit = np.isnan, np.copysign, np.signbit
    rint, floor, exp, log, log1p = np.rint, np.floor, np.exp, np.log, np.log1p
    _tables = {}

    @staticmethod
    def select(mask, a, b):
        return np.where(mask, a, b)

    @staticmethod
    def fma(a, b, c):
        return a * b + c

    @staticmethod
    def erf(x):
        return np_erf(np.asarray(x, np.float64))

    @staticmethod
    def two_prod(a, b):
        """(a*b, its rounding error) exactly, by Dekker's product (|a|, |b| < 2^996)."""
        def split(v):
            t = _SPLIT * v
            hi = t - (t - v)
            return hi, v - hi
        p = a * b
        ah, al = split(a)
        bh, bl = split(b)
        return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl

    @staticmethod
    def horner(x, coeffs):
        acc = np.full(np.shape(x), coeffs[0])
        for co in coeffs[1:]:
            acc = acc * x + co
        return acc

    @staticmethod
    def index_bits(x, lo_exp, sub, n):
        bits = np.ascontiguousarray(x, np.float64).view(np.int64)
        j = (bits >> (52 - sub)) - ((1023 + lo_exp) << sub)
        return np.clip(j, 0, n - 1)

    @staticmethod
    def index_float(v, offset, n):
        k = np.where(v >= 0, np.minimum(np.floor(v), n - 1), 0)
        return k.astype(np.int64) + offset

    @classmethod
    def _columns(cls, name, rows):
        cols = cls._tables.get(name)
        if cols is None:
            a = np.array(rows, np.float64)
            cols = cls._tables[name] = [np.ascontiguousarray(a[:, k])
                                        for k in range(a.shape[1] - 1, -1, -1)]
        return cols

    @classmethod
    def gather(cls, name, values, j):
        return cls._columns(name, [[v] for v in values])[0].take(j)

    @classmethod
    def table(cls, name, rows, j, t):
        cols = cls._columns(name, rows)
        acc = cols[0].take(j)
        for col in cols[1:]:
            acc = acc * t + col.take(j)
        return acc


_CHUNK = 16384      # elements per pass: the method's intermediate arrays stay in cache


def _evaluate(kernel, *xs):
    """kernel on float arrays: in float64, the result in the inputs' float dtype (in chunks
    of _CHUNK elements)."""
    dt = np.result_type(*xs)
    if dt.kind != "f":
        dt = np.dtype(np.float32)
    shape = np.broadcast_shapes(*[np.shape(x) for x in xs])
    args = [np.ascontiguousarray(np.broadcast_to(np.asarray(x, np.float64), shape)).reshape(-1)
            for x in xs]
    n = args[0].shape[0] if args else 0
    out = np.empty(n, dt)
    with np.errstate(all="ignore"):
        for start in range(0, n, _CHUNK):
            part = [a[start:start + _CHUNK] for a in args]
            out[start:start + _CHUNK] = kernel(NumpyMath, *part)
    return out.reshape(shape)


def _unary(name):
    kernel = K.KERNELS[name]

    def fn(x):
        return _evaluate(kernel, x)
    fn.__name__ = f"np_{name}"
    fn.__doc__ = f"{name} of a float array (special_kernels.{name})."
    return fn


np_erfc = _unary("erfc")
np_erfinv = _unary("erfinv")
np_lgamma = _unary("lgamma")
np_digamma = _unary("digamma")
np_trigamma = _unary("trigamma")


def np_atan2(y, x):
    """atan2 by special_kernels.atan2 (native code's method; eager uses np.arctan2)."""
    return _evaluate(K.atan2, y, x)


# ---- zeta(s, q) and polygamma -----------------------------------------------------------------

_ZETA_A = (12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9,
           7.47242496e10, -2.950130727918164224e12, 1.1646782814350067249e14,
           -4.5979787224074726105e15, 1.8152105401943546773e17, -7.1661652561756670113e18)
_MACHEP = 1.11022302462515654042e-16


def np_zeta_constants():
    """(the Euler-Maclaurin coefficients, machine epsilon) of np_zeta (native code's too)."""
    return _ZETA_A, _MACHEP


def np_zeta(x, q):
    """The Hurwitz zeta function zeta(x, q) for a float x > 1, elementwise over the array q:
    PyTorch's (Cephes') method step for step: a direct sum until q + k > 9 (and at least 9
    terms), then the Euler-Maclaurin tail, each stopped where the next term falls below
    machine epsilon relative; inf at the non-positive integers q."""
    q = np.asarray(q, np.float64).reshape(-1)
    out = np.full(q.shape, np.nan)
    pole = (q <= 0) & (q == np.floor(q))
    out[pole] = np.inf
    live = np.flatnonzero(~pole)
    qv = q[live]
    s, a, b = np.power(qv, -x), qv.copy(), np.zeros(qv.shape)
    i = 0
    while live.size:
        more = (a <= 9.0) if i >= 9 else np.ones(a.shape, bool)
        if not more.any():
            break
        i += 1
        a = np.where(more, a + 1.0, a)
        b = np.where(more, np.power(a, -x), b)
        s = np.where(more, s + b, s)
        hit = more & (-_MACHEP * s < b) & (b < _MACHEP * s)
        out[live[hit]] = s[hit]
        keep = ~hit
        live, s, a, b = live[keep], s[keep], a[keep], b[keep]
    w = a
    s = s + b * w / (x - 1.0) - 0.5 * b
    a, k = np.ones(s.shape), 0.0
    for coef in _ZETA_A:
        a = a * (x + k)
        b = b / w
        t = a * b / coef
        s = s + t
        hit = np.abs(t / s) < _MACHEP
        out[live[hit]] = s[hit]
        keep = ~hit
        live, s, a, b, w = live[keep], s[keep], a[keep], b[keep], w[keep]
        k += 1.0
        a = a * (x + k)
        b = b / w
        k += 1.0
    out[live] = s
    return out


def np_polygamma(x, n):
    """The n-th derivative of digamma at x (n >= 0), as PyTorch computes it."""
    if n == 0:
        return np_digamma(x)
    if n == 1:
        return np_trigamma(x)
    x = np.asarray(x)
    dt = x.dtype if x.dtype.kind == "f" else np.dtype(np.float32)
    scale = (1.0 if (n + 1) % 2 == 0 else -1.0) * float(math.factorial(n))
    with np.errstate(all="ignore"):
        r = scale * np_zeta(float(n + 1), x)
    return r.reshape(x.shape).astype(dt, copy=False)
