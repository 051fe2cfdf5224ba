"""torch.special's orthogonal polynomials (Chebyshev T/U/V/W and their shifted forms,
Hermite H and He, Laguerre L, Legendre P) of (x, n) and the Hurwitz zeta function of (x, q)
on NumPy arrays, as PyTorch's kernels (aten/src/ATen/native/Math.h) compute them.

The polynomials run in the input's precision: n is truncated to an integer (nan, inf and
values past int64 become int64's minimum, as the C cast gives on x86, so 0; Hermite H's
nan and inf become -1), then PyTorch's early cases (n < 0, |x| = 1, the closed forms
cos(n acos x) for |x| < 1 and n past a few) and otherwise its three-term recurrence, which
stops once the value is nan; each step's a * b - c is one fused multiply-add and the closed
forms call libm's acos / cos / sin, as PyTorch's compiled kernels (equal bit for bit there).
Zeta is Cephes' Euler-Maclaurin summation in float64 with libm's pow (PyTorch's accumulate
type; its first term in the input's precision, as PyTorch's)."""
import numpy as np

from .fused_madd import fma
from .libm_np import libm
from .special_numpy import np_zeta_constants

_INT64_MIN = np.iinfo(np.int64).min
_HERMITE_LIMIT = {4: 128, 8: 512}    # (n past it: nan, by itemsize)


def _acos(x):
    return libm("acos", x)


def _cos(x):
    return libm("cos", x)


def _sin(x):
    return libm("sin", x)


def _fma(a, b, c):
    # (PyTorch's kernels are built with FMA contraction: a * b - c is one fused operation)
    return fma(a, b, c, a.dtype)


def _int_degree(n, fn):
    bad = ~np.isfinite(n) | (np.abs(n) >= 2.0 ** 63)
    m = np.trunc(np.where(bad, 0, n)).astype(np.int64)
    return np.where(bad, -1 if fn == "hermite_polynomial_h" else _INT64_MIN, m)


def _recurrence(x, n, p, q, k0, step, check_nan=True, while_less=False):
    """q after PyTorch's loop `for k = k0; k <= n (k < n); k++: p, q = q, step(k, p, q)`,
    stopping at a nan q where check_nan (r starts as q: PyTorch leaves it unset when the
    loop never runs, which only a nan x reaches)."""
    t = x.dtype.type
    idx = np.arange(x.size)
    out = q.copy()
    k = k0
    while idx.size:
        more = (k < n) if while_less else (k <= n)
        if check_nan:
            more &= ~np.isnan(q)
        if not more.all():          # (compacted only when an element finishes)
            idx, x, n, p, q = idx[more], x[more], n[more], p[more], q[more]
            if not idx.size:
                break
        p, q = q, step(x, t(k), p, q)
        out[idx] = q
        k += 1
    return out


def _shift(x):
    t = x.dtype.type
    return x + x - t(1.0)


def _chebyshev(x, n, fn):
    """The (shifted) Chebyshev polynomials: PyTorch's cases in order, then the recurrence."""
    t = x.dtype.type
    kind = fn[-1]
    shifted = fn.startswith("shifted")
    y = _shift(x) if shifted else x
    nf = n.astype(x.dtype)
    even = n % 2 == 0
    res = np.zeros_like(x)
    done = n < 0
    cases = []
    one_or_sign = np.where(even, t(1.0), t(-1.0))
    n1 = (n + 1).astype(x.dtype)
    n21 = (n + n + 1).astype(x.dtype)
    if shifted:
        at_one, at_other = x == t(1.0), x == t(0.0)
    else:
        at_one, at_other = (np.abs(x) == t(1.0)) & (x > 0), (np.abs(x) == t(1.0)) & (x <= 0)
    ends = {"t": (t(1.0), one_or_sign), "u": (n1, np.where(even, n1, -n1)),
            "v": (t(1.0), np.where(even, n21, -n21)), "w": (n21, one_or_sign)}[kind]
    if not shifted and kind in "tu":       # (|x| = 1: x > 0 or n even gives the + end)
        ends = (ends[0], np.where(even, ends[0], ends[1]))
    cases += [(at_one, ends[0]), (at_other, ends[1])]
    limit = {"t": 6, "u": 8, "v": 8, "w": 8}[kind] if not shifted else (4 if kind == "w" else 6)
    inner = (n > limit) & (np.abs(y) < t(1.0))
    acos = _acos(np.where(inner, y, t(0.0)))
    if kind == "t":
        closed = _cos(nf * acos)
    elif kind == "u":
        s = _sin(acos)
        closed = np.where(s != 0, _sin(n1 * acos) / s, n1 * _cos(n1 * acos) / y)
    elif kind == "v":
        closed = np.where(_sin(acos / t(2.0)) != t(1.0), _cos((nf + t(0.5)) * acos) /
                          _cos(acos / t(2.0)), np.where(even, n21, -n21))
    else:
        keep = _cos(acos / t(2.0)) != t(1.0)
        edge = np.where(y > 0, n21, one_or_sign) if not shifted else one_or_sign
        closed = np.where(keep, _sin((nf + t(0.5)) * acos) / _sin(acos / t(2.0)), edge)
    cases.append((inner, closed))
    first = {"t": y, "u": y + y, "v": y + y - t(1.0), "w": y + y + t(1.0)}[kind]
    cases += [(n == 0, t(1.0)), (n == 1, first)]
    for cond, val in cases:
        res = np.where(~done & cond, val, res)
        done = done | cond
    live = ~done
    res[live] = _recurrence((y + y)[live], n[live], np.ones_like(x[live]), first[live], 2,
                            lambda c, k, p, q: _fma(c, q, -p))
    return res


def _hermite(x, n, fn):
    t = x.dtype.type
    physicists = fn == "hermite_polynomial_h"
    first = x + x if physicists else x
    res = np.where(n < 0, t(0.0), np.where(n == 0, t(1.0), first))
    big = n > _HERMITE_LIMIT[x.dtype.itemsize]
    res = np.where(big & (n > 1), t(np.nan), res)
    live = (n > 1) & ~big
    if physicists:     # k = 2, 4, .., 2n - 2: r = 2x q - k p
        rec = _recurrence(x[live], n[live] - 1, np.ones_like(x[live]), first[live], 1,
                          lambda c, k, p, q: _fma(c + c, q, -((k + k) * p)), check_nan=False)
    else:
        rec = _recurrence(x[live], n[live], np.ones_like(x[live]), first[live], 1,
                          lambda c, k, p, q: _fma(c, q, -(k * p)), check_nan=False,
                          while_less=True)
    res[live] = rec
    return res


def _laguerre(x, n, fn):
    t = x.dtype.type
    first = t(1.0) - x
    res = np.where(n < 0, t(0.0), np.where((np.abs(x) == 0) | (n == 0), t(1.0), first))
    live = (n > 1) & (np.abs(x) != 0)
    res[live] = _recurrence(
        x[live], n[live], np.ones_like(x[live]), first[live], 1,
        lambda c, k, p, q: _fma(k + k + (t(1.0) - c), q, -(k * p)) / (k + t(1.0)),
        while_less=True)
    return res


def _legendre(x, n, fn):
    t = x.dtype.type
    ends = (np.abs(x) == t(1.0))
    sign = np.where((x > 0) | (n % 2 == 0), t(1.0), t(-1.0))
    res = np.where(n < 0, t(0.0), np.where(ends, sign, np.where(n == 0, t(1.0), x)))
    live = (n > 1) & ~ends
    res[live] = _recurrence(
        x[live], n[live], np.ones_like(x[live]), x[live], 1,
        lambda c, k, p, q: _fma((k + k + t(1.0)) * c, q, -(k * p)) / (k + t(1.0)),
        while_less=True)
    return res


def _dtype_of(*xs):
    """The arrays' float dtype (a Python number, PyTorch's Scalar, takes the tensor's)."""
    arrays = [x for x in xs if isinstance(x, np.ndarray) or isinstance(x, np.generic)]
    dt = np.result_type(*arrays) if arrays else np.dtype(np.float64)
    return dt if dt.kind == "f" else np.dtype(np.float32)


POLYNOMIALS = {f"{s}chebyshev_polynomial_{k}": _chebyshev for s in ("", "shifted_")
               for k in "tuvw"}
POLYNOMIALS.update(hermite_polynomial_h=_hermite, hermite_polynomial_he=_hermite,
                   laguerre_polynomial_l=_laguerre, legendre_polynomial_p=_legendre)


def np_polynomial(x, n, fn):
    """torch.special.<fn>(x, n) of float arrays (or numbers) x and n, broadcast."""
    dt = _dtype_of(x, n)
    x, n = np.asarray(x), np.asarray(n)
    shape = np.broadcast_shapes(x.shape, n.shape)
    xs = np.broadcast_to(x.astype(dt, copy=False), shape).reshape(-1).copy()
    with np.errstate(all="ignore"):
        ns = _int_degree(np.broadcast_to(n.astype(dt, copy=False), shape).reshape(-1), fn)
        r = POLYNOMIALS[fn](xs, ns, fn)
    return r.astype(dt, copy=False).reshape(shape)


def np_hurwitz_zeta(x, q):
    """torch.special.zeta(x, q) of float arrays (or numbers) x and q, broadcast: inf at x = 1
    and at the non-positive integers q, nan below x = 1 and at other q <= 0 unless x is an
    integer; else Cephes' direct sum (at least 9 terms, until q + k > 9) and Euler-Maclaurin
    tail, each stopped once a term is below machine epsilon relative to the sum."""
    dt = _dtype_of(x, q)
    x, q = np.asarray(x), np.asarray(q)
    shape = np.broadcast_shapes(x.shape, q.shape)
    xs = np.broadcast_to(x.astype(dt, copy=False).astype(np.float64), shape).reshape(-1)
    qs = np.broadcast_to(q.astype(dt, copy=False).astype(np.float64), shape).reshape(-1)
    with np.errstate(all="ignore"):
        return _zeta(xs, qs, dt).astype(dt).reshape(shape)


def _zeta(x, q, dt):
    coefs, eps = np_zeta_constants()
    out = np.full(x.shape, np.nan)
    nonpos = q <= 0
    pole = nonpos & (q == np.floor(q))
    out[pole] = np.inf
    nan = (x < 1) | nonpos & ~pole & (x != np.floor(x))
    out[nan] = np.nan           # (PyTorch's order: x = 1, x < 1, then q's poles)
    out[x == 1] = np.inf
    live = np.flatnonzero(~(pole | nan | (x == 1)))
    x, q = x[live], q[live]
    # (PyTorch's first term is std::pow of the inputs' own type: powf for float32)
    s = libm("pow", q.astype(dt), (-x).astype(dt)).astype(np.float64)
    a, b = q.copy(), np.zeros(q.shape)
    i = 0
    while live.size:
        more = (a <= 9.0) if i >= 9 else np.ones(a.shape, bool)
        if not more.any():
            break
        i += 1
        a = np.where(more, a + 1.0, a)
        b = np.where(more, libm("pow", a, -x), b)
        s = np.where(more, s + b, s)
        hit = more & (-eps * s < b) & (b < eps * s)
        out[live[hit]] = s[hit]
        keep = ~hit
        live, s, a, b, x = live[keep], s[keep], a[keep], b[keep], x[keep]
    w = a
    s = s + b * w / (x - 1.0)
    s = s - 0.5 * b
    a, k = np.ones(s.shape), 0.0
    for coef in coefs:
        a = a * (x + k)
        b = b / w
        t = a * b / coef
        s = s + t
        hit = np.abs(t / s) < eps
        out[live[hit]] = s[hit]
        keep = ~hit
        live, s, a, b, w, x = live[keep], s[keep], a[keep], b[keep], w[keep], x[keep]
        k += 1.0
        a = a * (x + k)
        b = b / w
        k += 1.0
    out[live] = s
    return out
