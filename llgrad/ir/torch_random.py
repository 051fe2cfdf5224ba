"""PyTorch's CPU random numbers, as pure functions of an explicit state array.

A seed gives PyTorch's numbers: its CPU generator is a 32-bit Mersenne Twister (MT19937,
seeded by init_genrand with the seed's low 32 bits) plus the one Box-Muller value its
per-element normal draws keep for the next call, and each distribution is the
transformation ATen's CPU kernels apply (ATen/core/TransformationHelper.h,
DistributionsHelper.h, native/cpu/DistributionTemplates.h), in their order of draws.
The twister runs here in NumPy (a block of 624 words at a time) for small draws, in native
loops that draw and transform in one pass (codegen/twister.py) for large ones once they are
built, and until then in NumPy's MT19937 bit generator, whose state is the same 624 words.

The state lives in an int64[WORDS] array (the twister's key, its position, the cached
normal value and its flag, the seed), so a traced draw is a pure op of the graph
(`%values, %state1 = rng_normal %state0`) and the interpreter, compiled code and eager mode
draw identical numbers. Float32 normal draws of 16+ values go through ATen's vectorised
log/sin/cos (torch_vecmath.py), float64 ones and the per-element draws through C's."""
import math
import threading

import numpy as np

from . import bfloat16 as bf16_values
from .torch_vecmath import log_ps, sincos_ps

WORDS = 628
POS, HAS_NORMAL, NORMAL, SEED = 624, 625, 626, 627
_FLOAT_DIGITS = {"float64": 53, "float32": 24, "float16": 11, "bfloat16": 8}


def seeded(seed):
    """A fresh state array for `seed` (torch.manual_seed's: init_genrand of its low 32 bits)."""
    state = np.zeros(WORDS, dtype=np.int64)
    s = int(seed) & 0xFFFFFFFF
    key = np.empty(624, dtype=np.int64)
    key[0] = s
    for j in range(1, 624):
        s = (1812433253 * (s ^ (s >> 30)) + j) & 0xFFFFFFFF
        key[j] = s
    state[:624] = key
    state[POS] = 624
    seed = int(seed) % 2 ** 64
    state[SEED] = seed - 2 ** 64 if seed >= 2 ** 63 else seed     # (its bits, as int64)
    return state


_BIG = 4096                 # draws from which NumPy's twister (its state set and read back,
                            # ~90 us) beats twisting here (~15 us per 624 words)
_numpy_bits = []
_numpy_lock = threading.Lock()


# the twister as native loops (codegen/twister.py; compile/eager_twister.py installs them):
# native(name, key, pos, out) draws len(out) values of the loop `name` ("mt_u32",
# "mt_unit64", "mt_unit32") into out and returns the new position, or None where NumPy must
# draw (the loops not built yet); same numbers either way. Only a draw of NATIVE_MIN values or
# more starts their build (a short script never loads them); built, they serve every draw
_native = [None]
NATIVE_MIN = 4096


def set_native(fn):
    """Install fn as the native draw hook (None: NumPy draws everything); the previous."""
    prev, _native[0] = _native[0], fn
    return prev


_native_box_muller = [None]     # (compile/eager_twister.py's codegen/box_muller.py loop)


def set_native_box_muller(fn):
    """Install fn(u, mean, std) -> the normals of the uniforms u (16 per block) or None, as
    the float32 normal_fill hook (None: NumPy's passes); the previous."""
    prev, _native_box_muller[0] = _native_box_muller[0], fn
    return prev


def _native_draws(stream, name, n, dtype):
    """n values of the native loop `name` into a new array of dtype, or None."""
    out = np.empty(n, dtype=dtype)
    pos = _native[0](name, stream.mt, stream.pos, out)
    if pos is None:
        return None
    stream.pos, stream.block = pos, None
    return out


_tempered = {}              # id(state array) -> (its 624 words, their tempered outputs):
                            # tempering once per block, not per draw (a cache: checked
                            # against the words, so any array with them may use it)


class Stream:
    """Draws from a state array; `close()` writes the advanced state back into it."""

    def __init__(self, state):
        self.state = state
        self.mt = state[:624].astype(np.uint32)
        self.pos = int(state[POS])
        self.block = None

    def u32(self, n):
        """n raw 32-bit draws (CPUGeneratorImpl::random), as uint64."""
        if _native[0] is not None:
            out = _native_draws(self, "mt_u32", n, np.uint64)
            if out is not None:
                return out
        if n >= _BIG:
            return self._numpy_draws(n)
        parts = []
        while n > 0:
            if self.pos >= 624:
                _twist(self.mt)
                self.pos, self.block = 0, None
            if self.block is None:
                self.block = self._tempered_block()
            take = min(n, 624 - self.pos)
            parts.append(self.block[self.pos:self.pos + take])
            self.pos += take
            n -= take
        if not parts:
            return np.zeros(0, dtype=np.uint64)
        return parts[0].copy() if len(parts) == 1 else np.concatenate(parts)

    def _tempered_block(self):
        hit = _tempered.get(id(self.state))
        if hit is not None and np.array_equal(hit[0], self.mt):
            return hit[1]
        block = _temper(self.mt).astype(np.uint64)
        if len(_tempered) > 16:
            _tempered.clear()
        _tempered[id(self.state)] = (self.mt.copy(), block)
        return block

    def _numpy_draws(self, n):
        with _numpy_lock:
            if not _numpy_bits:
                _numpy_bits.append(np.random.MT19937(0))
            bits = _numpy_bits[0]
            bits.state = {"bit_generator": "MT19937",
                          "state": {"key": self.mt, "pos": self.pos}}
            out = bits.random_raw(n)
            st = bits.state["state"]
            self.mt, self.pos = st["key"].astype(np.uint32), int(st["pos"])
            self.block = None
        return out

    def u64(self, n):
        """n 64-bit draws (random64: the first 32-bit draw is the high half)."""
        w = self.u32(2 * n)
        return (w[0::2] << np.uint64(32)) | w[1::2]

    def close(self):
        self.state[:624] = self.mt
        self.state[POS] = self.pos


_UPPER, _LOWER, _MATRIX = np.uint32(0x80000000), np.uint32(0x7FFFFFFF), np.uint32(0x9908B0DF)


def _twist(mt):
    """MT19937's regeneration of its 624 words, in place, in the four blocks whose words
    depend only on words already final (word i reads word i + 397 mod 624)."""
    for lo, hi, src in ((0, 227, 397), (227, 454, 0), (454, 623, 227)):
        y = (mt[lo:hi] & _UPPER) | (mt[lo + 1:hi + 1] & _LOWER)
        mt[lo:hi] = mt[src:src + hi - lo] ^ (y >> np.uint32(1)) ^ ((y & np.uint32(1)) * _MATRIX)
    y = (mt[623] & _UPPER) | (mt[0] & _LOWER)
    mt[623] = mt[396] ^ (y >> np.uint32(1)) ^ ((y & np.uint32(1)) * _MATRIX)


def _temper(words):
    y = words ^ (words >> 11)
    y ^= (y << 7) & 0x9D2C5680
    y ^= (y << 15) & 0xEFC60000
    return y ^ (y >> 18)


def _unit(stream, n, dtype):
    """uniform_real_distribution<dtype>(0, 1): the dtype's mantissa bits of one draw (exact
    in the dtype: an integer below 2**digits times a power of two)."""
    if _native[0] is not None and dtype in ("float64", "float32"):
        out = _native_draws(stream, "mt_unit64" if dtype == "float64" else "mt_unit32", n,
                            dtype)
        if out is not None:
            return out
    digits = _FLOAT_DIGITS[dtype]
    raw = stream.u64(n) if dtype == "float64" else stream.u32(n)
    ft = np.float64 if dtype == "float64" else np.float32
    return (raw & np.uint64((1 << digits) - 1)).astype(ft) * ft(2.0 ** -digits)


def uniform(state, n, dtype, low=0.0, high=1.0):
    """Tensor.uniform_(low, high) of n values (torch.rand: 0, 1), in draw order."""
    s = Stream(state)
    x = _unit(s, n, dtype if dtype in ("float64", "float32") else "float32")
    s.close()
    if dtype in ("float16", "bfloat16"):    # (a float32 draw rounded; one rounded up to 1 is 0)
        x = x.astype(np.float16) if dtype == "float16" else bf16_values.round_to(x).astype(x.dtype)
        x[x == 1] = 0
    if low == 0 and high == 1:              # (x * 1 + 0: x)
        return x.astype(_np(dtype), copy=False)
    if x.dtype == np.float64:
        return (x * (high - low) + low).astype(_np(dtype), copy=False)
    lo, hi = np.float32(low), np.float32(high)
    return (x * (hi - lo) + lo).astype(_np(dtype), copy=False)


def _float(dtype):
    return dtype if dtype in ("float64", "float32") else "float32"


def normal(state, n, dtype, mean=0.0, std=1.0, contiguous=True):
    """Tensor.normal_(mean, std) of n values (torch.randn: 0, 1)."""
    if n >= 16 and contiguous:
        return _normal_fill(state, n, dtype, mean, std).astype(_np(dtype), copy=False)
    s = Stream(state)
    out = np.empty(n, dtype=np.float64)
    k = 0
    if n and state[HAS_NORMAL]:
        out[0] = state[NORMAL:NORMAL + 1].view(np.float64)[0]
        state[HAS_NORMAL] = 0
        k = 1
    pairs = (n - k + 1) // 2
    u = _unit(s, 2 * pairs, "float64")
    u1, u2 = u[0::2], u[1::2]
    r = np.sqrt(-2.0 * glibc_log1p(-u2))
    theta = 2.0 * np.pi * u1
    both = np.empty(2 * pairs, dtype=np.float64)
    both[0::2], both[1::2] = r * np.cos(theta), r * np.sin(theta)
    out[k:] = both[:n - k]
    if (n - k) % 2:
        state[NORMAL:NORMAL + 1] = both[-1:].view(np.int64)
        state[HAS_NORMAL] = 1
    s.close()
    return (out * std + mean).astype(_np(dtype), copy=False)


def glibc_log1p(x):
    """log1p of a float64 array by C's log1p, as ATen's serial kernels call it (NumPy's
    differs from it by an ulp in about 7% of the values)."""
    return np.array([math.log1p(v) for v in x.tolist()], dtype=np.float64).reshape(x.shape)


def glibc_log(x):
    """log of a float64 array by C's log, as ATen's normal_fill calls it (NumPy's SIMD log
    differs from it by an ulp in about 0.4% of the values)."""
    return np.array(list(map(math.log, x.ravel().tolist())), dtype=np.float64).reshape(x.shape)


def _np(dtype):
    return np.float32 if dtype == "bfloat16" else np.dtype(dtype)


def _normal_fill(state, n, dtype, mean, std):
    """ATen's normal_fill: n uniforms, Box-Muller over blocks of 16 (the first 8 paired with
    the next 8), and for a ragged end the last 16 drawn afresh and transformed again."""
    s = Stream(state)   # (float16, bfloat16: whole blocks, then the tail's; float32: all n first)
    full = n // 16 * 16
    data = _unit(s, full if dtype in ("float16", "bfloat16") else n, _float(dtype))
    tail = _unit(s, 16, _float(dtype)) if n % 16 else None
    s.close()
    out = np.empty(n, dtype=data.dtype)
    out[:full] = _box_muller16(data[:full], dtype, mean, std)
    if tail is not None:
        out[n - 16:] = _box_muller16(tail, dtype, mean, std)
    return out


def _box_muller16(u, dtype, mean, std):
    blocks = u.reshape(-1, 16)
    u1, u2 = 1 - blocks[:, :8], blocks[:, 8:]
    if dtype == "float64":
        radius = np.sqrt(-2 * glibc_log(u1))
        theta = 2.0 * np.pi * u2
        c, s = radius * np.cos(theta) * std + mean, radius * np.sin(theta) * std + mean
    else:       # float32 throughout, the final multiply-add fused (as PyTorch's FMA)
        hook = _native_box_muller[0]
        done = hook(np.ascontiguousarray(u, np.float32), mean, std) if hook else None
        if done is not None:                # (the same operations in one native loop)
            return done.astype(u.dtype, copy=False)
        radius = np.sqrt(np.float32(-2) * log_ps(u1))     # (ATen's vectorised log, sin, cos)
        sin, cos = sincos_ps(np.float32(2.0 * np.pi) * u2)
        c, s = radius * cos, radius * sin
        if std != 1 or mean != 0:
            c = (c.astype(np.float64) * np.float32(std) + np.float32(mean)).astype(np.float32)
            s = (s.astype(np.float64) * np.float32(std) + np.float32(mean)).astype(np.float32)
    out = np.concatenate([c, s], axis=1).astype(u.dtype)
    return out.reshape(-1)


def randint(state, n, low, high, dtype="int64"):
    """torch.randint(low, high) / Tensor.random_(low, high): (draw % range) + low, drawing
    64 bits for ranges of 2**28 and more (PyTorch 2.13's rule, measured)."""
    span = int(high) - int(low)
    s = Stream(state)
    wide = span >= 1 << 28
    raw = s.u64(n) if wide else s.u32(n)
    s.close()
    if span >= 1 << 64:         # the whole int64 range: the draw itself (PyTorch's full kernel)
        vals = raw.view(np.int64)
    else:                       # (in uint64, wrapping as int64 does)
        vals = (raw % np.uint64(span) + np.uint64(int(low) % 2 ** 64)).view(np.int64)
    return vals.astype(_np(dtype) if dtype != "bool" else np.bool_)


def integers(state, n, of, low=0, high=1, full=False):
    """Tensor.random_ of a tensor of dtype `of`, as int64: full, the bound-less form
    (random_full), else [low, high) (randint)."""
    k = random_full(state, n, of) if full else \
        randint(state, n, low, high, of if of != "bool" else "int64")
    return np.asarray(k).astype(np.int64)


_INT_MAX = {"int64": 2 ** 63 - 1, "int32": 2 ** 31 - 1, "int16": 2 ** 15 - 1, "int8": 127,
            "uint8": 255}


def random_full(state, n, dtype):
    """Tensor.random_() with no bounds: [0, max] of integers, [0, 2**digits] of floats."""
    s = Stream(state)
    if dtype == "bool":
        out = (s.u32(n) & np.uint64(1)).astype(np.bool_)
    elif dtype in ("int64", "float64"):
        raw = s.u64(n)
        mod = 2 ** 63 if dtype == "int64" else (1 << 53) + 1
        out = (raw % np.uint64(mod)).astype(np.int64).astype(_np(dtype))
    else:
        raw = s.u32(n)
        mod = _INT_MAX[dtype] + 1 if dtype in _INT_MAX else (1 << _FLOAT_DIGITS[dtype]) + 1
        out = (raw % np.uint64(mod)).astype(np.int64).astype(_np(dtype))
    s.close()
    return out


def randperm(state, n):
    """torch.randperm(n): ATen's swap loop, position i swapped with i + draw % (n - i)."""
    s = Stream(state)
    draws = s.u32(max(n - 1, 0))
    s.close()
    if n <= 1:
        return np.arange(n, dtype=np.int64)
    offsets = (draws % np.arange(n, 1, -1, dtype=np.uint64)).astype(np.int64).tolist()
    perm = list(range(n))
    for i, z in enumerate(offsets):
        j = i + z
        perm[i], perm[j] = perm[j], perm[i]
    return np.array(perm, dtype=np.int64)


def bernoulli(state, n, p, dtype):
    """Tensor.bernoulli_(p) for a number p (dropout's masks): one 64-bit uniform per
    element, 1 where below p (PyTorch 2.13 draws so on every CPU)."""
    s = Stream(state)
    u = _unit(s, n, "float64")
    s.close()
    return (u < p).astype(_np(dtype) if dtype != "bool" else np.bool_)


def bernoulli_tensor(state, p):
    """torch.bernoulli(p) for a tensor of probabilities: one uniform per element, in the
    precision of p (64 bits for float64, 32 for others), 1 where below p."""
    s = Stream(state)
    dt = "float64" if p.dtype == np.float64 else "float32"
    u = _unit(s, p.size, dt)
    s.close()
    return (u < p.reshape(-1).astype(u.dtype)).reshape(p.shape)


def exponential(state, n, lambd, dtype):
    """Tensor.exponential_(lambd): -1 / lambd * log(1 - u), u a 64-bit uniform."""
    s = Stream(state)
    u = _unit(s, n, "float64")
    s.close()
    return (-1.0 / lambd * np.log(1.0 - u)).astype(_np(dtype))


def uniform64(state, n):
    """n float64 uniforms in [0, 1) (what per-element double kernels draw)."""
    s = Stream(state)
    u = _unit(s, n, "float64")
    s.close()
    return u


def rrelu_noise(state, x, lower, upper):
    """Training-mode rrelu's slopes for the array x (ATen's _rrelu_with_noise_train): one
    double uniform on [lower, upper) per element <= 0, in C order, so the number of draws
    depends on the values; 1 at the others (NaN too, which `<= 0` does not take). The bounds
    are rounded to x's compute type first (float for float32), each slope back to x's dtype."""
    mask = np.asarray(x) <= 0
    s = Stream(state)
    u = _unit(s, int(np.count_nonzero(mask)), "float64")
    s.close()
    ft = np.float64 if x.dtype == np.float64 else np.float32
    lo, hi = float(ft(lower)), float(ft(upper))
    noise = np.ones(x.shape, x.dtype)
    noise[mask] = (u * (hi - lo) + lo).astype(ft)
    return noise
