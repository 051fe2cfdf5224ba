"""PyTorch's CPU Gamma, Dirichlet, Poisson and Binomial draws (ATen's _s_gamma_cpu,
_s_dirichlet_cpu, _s_poisson_cpu and _s_binomial_cpu), as pure functions of a generator state
array (torch_random.py), so torch.manual_seed gives PyTorch's samples for Gamma, Beta,
Dirichlet, Chi2, StudentT, FisherSnedecor, Poisson, NegativeBinomial and Binomial, and
torch.poisson's and torch.binomial's.

ATen walks the elements in order with Marsaglia and Tsang's rejection sampler
(native/Distributions.h: sample_gamma), each element drawing from the one generator as many
double uniforms (53 bits of a 64-bit draw) and double normals (Box-Muller, one value of each
pair kept in the generator for the next draw) as its rejections need: the number of draws
depends on the values, so the loop is serial, here in Python floats (C doubles: math's
log, pow, sqrt, sin, cos are C's). The sampler's arithmetic is copied with its types: the
literals are C floats (1.0f / 3.0f is float32's third), and for float32 tensors alpha itself
is a float (1 / alpha and alpha + 1 rounded to float32); Dirichlet samples in double."""
import ctypes
import ctypes.util
import math

import numpy as np

from .torch_random import HAS_NORMAL, NORMAL, Stream

_THIRD = float(np.float32(1.0) / np.float32(3.0))      # 1.0f / 3.0f
_SQUEEZE = float(np.float32(0.0331))                   # 0.0331f
_UNIT = 2.0 ** -53
_MASK53 = (1 << 53) - 1
_TWO_PI = 2.0 * math.pi
_F32 = np.float32
_INT64_MIN = -(1 << 63)     # (x86's conversion of a double out of int64's range, NaN too)


def _libm(name, ctype, fallback):
    """C's function `name` of one `ctype` (ATen's std::lgamma and std::log1p(float): Python's
    math.lgamma is CPython's own, and it has no float32 log1p)."""
    try:
        fn = getattr(ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6"), name)
    except (OSError, AttributeError):
        return fallback
    fn.restype, fn.argtypes = ctype, (ctype,)
    return fn


_lgamma = _libm("lgamma", ctypes.c_double, math.lgamma)
_log1pf = _libm("log1pf", ctypes.c_float, lambda v: float(np.float32(math.log1p(v))))


def _log(v):
    """C's log of v >= 0 (log(0) is -inf there, an error in Python)."""
    return math.log(v) if v > 0 else -math.inf


class _Draws:
    """Doubles drawn one at a time from a state array (prefetched in blocks; `close()`
    leaves the state advanced by exactly the draws used)."""

    def __init__(self, state):
        self.state = state
        self.words, self.next, self.used = [], 0, 0

    def uniform(self):
        """at::uniform_real_distribution<double>(0, 1)."""
        if self.next == len(self.words):           # (the twister's words stay the start's
            s = Stream(np.array(self.state, copy=True))     # until close: skip those used)
            s.u32(2 * self.used)
            self.words = s.u64(max(64, self.used)).tolist()
            self.next = 0
        w = self.words[self.next]
        self.next += 1
        self.used += 1
        return (w & _MASK53) * _UNIT

    def normal(self):
        """at::normal_distribution<double>(0, 1): the generator's kept value, else a
        Box-Muller pair whose second value it keeps."""
        st = self.state
        if st[HAS_NORMAL]:
            st[HAS_NORMAL] = 0
            return float(st[NORMAL:NORMAL + 1].view(np.float64)[0])
        u1, u2 = self.uniform(), self.uniform()
        r = math.sqrt(-2.0 * math.log1p(-u2))
        theta = _TWO_PI * u1
        st[NORMAL:NORMAL + 1] = np.array([r * math.sin(theta)]).view(np.int64)
        st[HAS_NORMAL] = 1
        return r * math.cos(theta)

    def close(self):
        """Advance the state's twister by the draws used (its normal cache is current)."""
        s = Stream(self.state)
        s.u32(2 * self.used)
        s.close()


def _sample(alpha, draws, single):
    """sample_gamma<scalar_t, double> of one alpha (single: scalar_t is float)."""
    scale = 1.0
    if alpha < 1.0:
        if alpha == 0.0:
            return 0.0
        inv = float(_F32(1.0) / _F32(alpha)) if single else 1.0 / alpha
        scale *= math.pow(1 - draws.uniform(), inv)
        alpha = float(_F32(alpha) + _F32(1.0)) if single else alpha + 1.0
    d = float(_F32(alpha) - _F32(_THIRD)) if single else alpha - _THIRD
    c = 1.0 / math.sqrt(9.0 * d)
    while True:
        while True:
            x = draws.normal()
            y = 1.0 + c * x
            if not y <= 0:
                break
        v = y * y * y
        u = 1 - draws.uniform()
        xx = x * x
        if u < 1.0 - _SQUEEZE * xx * xx:
            return scale * d * v
        if _log(u) < 0.5 * xx + d * (1.0 - v + _log(v)):
            return scale * d * v


def standard_gamma(state, alpha):
    """torch._standard_gamma(alpha) for a float32 or float64 array alpha: its draws in C
    order, each at least the dtype's smallest normal value, as ATen clamps them."""
    single = alpha.dtype == np.float32
    tiny = float(np.finfo(alpha.dtype).tiny)
    draws = _Draws(state)
    out = np.empty(alpha.shape, alpha.dtype)
    flat = out.reshape(-1)
    with np.errstate(all="ignore"):
        for i, a in enumerate(np.ascontiguousarray(alpha).reshape(-1).tolist()):
            g = _sample(a, draws, single)
            g = float(_F32(g)) if single else g
            flat[i] = tiny if not tiny < g else g       # (std::max(min, g): NaN gives min)
    draws.close()
    return out


def dirichlet(state, alpha):
    """torch._sample_dirichlet(alpha) for a float32 or float64 array alpha: double Gamma
    draws in C order, each divided by its row's sum over the last dim and clamped to
    [the dtype's smallest normal value, the largest below 1]."""
    draws = _Draws(state)
    flat = np.ascontiguousarray(alpha).reshape(-1).tolist()
    dmin = float(np.finfo(np.float64).tiny)
    g = np.empty(len(flat), np.float64)
    for i, a in enumerate(flat):
        s = _sample(a, draws, False)
        g[i] = s if dmin < s else dmin
    draws.close()
    g = g.reshape(alpha.shape)
    total = np.zeros(alpha.shape[:-1] + (1,), np.float64)
    for k in range(alpha.shape[-1]):            # (in order: ATen's sum of a short row)
        total[..., 0] += g[..., k]
    with np.errstate(all="ignore"):
        ratio = (g / total).astype(alpha.dtype)
    hi = np.nextafter(alpha.dtype.type(1), alpha.dtype.type(0))
    lo = np.finfo(alpha.dtype).tiny
    ratio = np.where(lo < ratio, ratio, lo)                 # std::max(min, r)
    return np.where(ratio < hi, ratio, hi).astype(alpha.dtype)     # std::min(max, ...)


def _poisson_one(lam, draws):
    """ATen's sample_poisson of one rate (native/Distributions.cpp): Hoermann's transformed
    rejection from rate 10, the product of uniforms below it."""
    if lam >= 10:
        slam, loglam = math.sqrt(lam), math.log(lam)
        b = 0.931 + 2.53 * slam
        a = -0.059 + 0.02483 * b
        invalpha = 1.1239 + 1.1328 / (b - 3.4)
        vr = 0.9277 - 3.6224 / (b - 2)
        while True:
            U = draws.uniform() - 0.5
            V = draws.uniform()
            us = 0.5 - abs(U)
            x = (2 * a / us + b) * U + lam + 0.43
            k = int(math.floor(x)) if -2.0 ** 63 <= x < 2.0 ** 63 else _INT64_MIN
            if us >= 0.07 and V <= vr:
                return k
            if k < 0 or (us < 0.013 and V > us):
                continue
            if _log(V) + math.log(invalpha) - math.log(a / (us * us) + b) <= \
                    -lam + k * loglam - _lgamma(k + 1.0):
                return k
    if lam == 0:
        return 0
    enlam = math.exp(-lam)
    x, prod = 0, 1.0
    while True:
        prod *= draws.uniform()
        if prod > enlam:
            x += 1
        else:
            return x


def poisson(state, rates):
    """torch.poisson(rates) for a float array (read as doubles): its draws in C order, in the
    rates' dtype. A negative or NaN rate raises PyTorch's error before any draw."""
    flat = np.ascontiguousarray(rates).reshape(-1)
    if not (flat >= 0).all():
        raise RuntimeError("invalid Poisson rate, expected rate to be non-negative")
    draws = _Draws(state)
    out = [_poisson_one(lam, draws) for lam in flat.astype(np.float64).tolist()]
    draws.close()
    return np.array(out, np.float64).astype(rates.dtype).reshape(rates.shape)


_TAIL = (0.0810614667953272, 0.0413406959554092, 0.0276779256849983, 0.02079067210376509,
         0.0166446911898211, 0.0138761288230707, 0.0118967099458917, 0.0104112652619720,
         0.00925546218271273, 0.00833056343336287)


def _tail(k):
    """stirling_approx_tail (native/Distributions.h)."""
    if k <= 9:
        return _TAIL[int(k)]
    kp1sq = (k + 1) * (k + 1)
    return (1.0 / 12 - (1.0 / 360 - 1.0 / 1260 / kp1sq) / kp1sq) / (k + 1)


def _inversion(count, prob, draws, f, single):
    logprob = _log1pf(-prob) if single else math.log1p(-prob)
    geom_sum, num_geom = 0.0, 0.0
    while True:
        geom = math.ceil(_log(draws.uniform()) / logprob) if logprob else math.inf
        geom_sum += geom
        if geom_sum > count:
            return num_geom
        num_geom = f(num_geom + 1)


def _btrs(count, prob, draws, f, single):
    """ATen's btrs: its scalar_t (float for float32 tensors) operations rounded by f."""
    var = f(f(count * prob) * f(1 - prob))
    stddev = f(math.sqrt(var))                  # (std::sqrt of a float: a float)
    b = 1.15 + 2.53 * stddev
    a = -0.0873 + 0.0248 * b + 0.01 * prob
    c = f(count * prob) + 0.5
    v_r = 0.92 - 4.2 / b
    r = f(prob / f(1 - prob))
    alpha = (2.83 + 5.1 / b) * stddev
    m = math.floor(f(f(count + 1) * prob))
    while True:
        U = draws.uniform() - 0.5
        V = draws.uniform()
        us = 0.5 - abs(U)
        x = (2 * a / us + b) * U + c
        k = f(math.floor(x)) if math.isfinite(x) else x
        if k < 0 or k > count:
            continue
        if us >= 0.07 and V <= v_r:
            return k
        V = _log(V * alpha / (a / (us * us) + b))
        ck1 = f(f(count - k) + 1)
        upperbound = ((m + 0.5) * _log((m + 1) / (r * (count - m + 1)))
                      + f(count + 1) * _log((count - m + 1) / ck1)
                      + (k + 0.5) * _log(r * ck1 / f(k + 1))
                      + _tail(m) + _tail(count - m) - _tail(k) - _tail(f(count - k)))
        if V <= upperbound:
            return k


def _binomial_one(count, prob, draws, single):
    """ATen's sample_binomial of one (count, prob) pair."""
    f = (lambda v: float(_F32(v))) if single else (lambda v: v)
    if count <= 0.0 or prob <= 0.0:
        return 0.0
    if prob >= 1.0:
        return count
    if prob <= 0.5:
        if f(count * prob) >= 10.0:
            return _btrs(count, prob, draws, f, single)
        return _inversion(count, prob, draws, f, single)
    if prob > 0.5:
        q = f(1.0 - prob)
        if f(count * q) >= 10.0:
            return f(count - _btrs(count, q, draws, f, single))
        return f(count - _inversion(count, q, draws, f, single))
    return math.nan


def binomial(state, count, prob):
    """torch.binomial(count, prob) for float32 or float64 arrays of one shape: its draws
    in C order, in their dtype."""
    single = count.dtype == np.float32
    draws = _Draws(state)
    with np.errstate(all="ignore"):
        pairs = zip(np.ascontiguousarray(count).reshape(-1).tolist(),
                    np.ascontiguousarray(prob).reshape(-1).tolist())
        out = [_binomial_one(n, p, draws, single) for n, p in pairs]
    draws.close()
    return np.array(out, np.float64).astype(count.dtype).reshape(count.shape)
