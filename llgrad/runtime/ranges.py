"""The values of PyTorch's CPU linspace and logspace kernels, element for element: below
the halfway index start + step * i, from it end - step * (steps - 1 - i), each one fused
multiply-add (the kernels are compiled with FMA contraction) in the dtype's own arithmetic
(float16 and bfloat16 round after each operation; integers go through float64 and
truncate). NumPy's linspace rounds differently, an ulp apart in about half the elements."""
import math

import numpy as np

from ..ir import bfloat16 as bf16_values

_SPLIT = 134217729.0    # 2**27 + 1 (Veltkamp's splitting constant for float64)


def _split(a):
    h = a * _SPLIT
    h = h - (h - a)
    return h, a - h


def fma64(a, b, c):
    """a * b + c in float64 with one rounding (up to a double rounding once in ~2**50): the
    product's error (Dekker) and the sum's (Knuth) added back before the last rounding."""
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    pe = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    s = p + c
    bb = s - p
    se = (p - (s - bb)) + (c - bb)
    return s + (se + pe)


def _fma(a, b, c, npdt):
    if npdt == np.float64 or npdt.kind != "f":
        return fma64(a, b, c)
    # (float32: the product of two float32 values is exact in float64)
    return (a.astype(np.float64) * b + c).astype(npdt)


def _halves(steps):
    i = np.arange(steps)
    lo = i < steps // 2
    return lo, np.where(lo, i, steps - 1 - i)


def checked_steps(name, steps):
    """steps as an int, after PyTorch's errors: a float or a bool is a TypeError (2.5 steps
    would space the values past end), a negative count a RuntimeError."""
    if isinstance(steps, (bool, np.bool_)) or not hasattr(steps, "__index__"):
        raise TypeError(f"{name}() received an invalid combination of arguments - got "
                        f"steps of type {type(steps).__name__}, but expected int steps")
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    return int(steps)


def check_bounds(name, start, end):
    """PyTorch's error for a start or end tensor of 1 or more dims (NumPy would broadcast
    it, or fail in its own words), and its TypeError for a bound that is not a number."""
    for w, v in (("start", start), ("end", end)):
        if not hasattr(v, "__float__") and not hasattr(v, "ndim") and type(v) is not complex:
            raise TypeError(f"{name}() received an invalid combination of arguments - got "
                            f"{w} of type {type(v).__name__}, but expected a number")
    ts = [(w, v.ndim) for w, v in (("start", start), ("end", end)) if hasattr(v, "ndim")
          and not isinstance(v, (np.generic,))]
    if any(nd for _, nd in ts):
        got = " and ".join(f"{w} with {nd} dimension(s)" for w, nd in ts)
        raise RuntimeError(f"{name} only supports 0-dimensional start and end tensors, but got "
                           f"{got}.")


def linspace_values(start, end, steps, npdt):
    """torch.linspace(start, end, steps) in NumPy dtype npdt, as PyTorch's kernel."""
    npdt = np.dtype(npdt)
    if steps <= 1:
        return np.full(steps, start).astype(npdt)
    lo, k = _halves(steps)
    if npdt.kind != "f":        # (int bounds, a float64 step; the result truncated)
        # (Scalar.to<scalar_t>: truncated, wrapped into the dtype: uint8 from -9 is 247)
        s, e = (float(np.array(int(v), np.int64).astype(npdt)) for v in (start, end))
        step = (e - s) / (steps - 1)
        base = np.where(lo, s, e)
        v = fma64(np.where(lo, step, -step), k.astype(np.float64), base)
        return np.trunc(v).astype(np.int64).astype(npdt)
    if npdt == bf16_values.STORAGE:     # (c10::BFloat16: each operation rounded, as float16's)
        r = bf16_values.round_to
        s, e = r(start).astype(np.float32), r(end).astype(np.float32)
        step = r(r(e - s).astype(np.float32) / np.float32(steps - 1)).astype(np.float32)
        prod = r(step * k.astype(np.float32)).astype(np.float32)
        return r(np.where(lo, s + prod, e - prod))
    T = npdt.type
    s, e = T(start), T(end)
    step = T(T(e - s) / T(steps - 1))
    if npdt == np.float16:      # (c10::Half: each operation computed in float, then rounded)
        prod = (np.float16(step) * k.astype(np.float16)).astype(np.float16)
        return np.where(lo, s + prod, e - prod).astype(np.float16)
    base = np.where(lo, s, e).astype(npdt)
    return _fma(np.where(lo, step, -step).astype(npdt), k.astype(npdt), base, npdt)


def logspace_values(start, end, steps, base, npdt):
    """torch.logspace in NumPy dtype npdt, as PyTorch's kernel: base to the float64 powers
    start + step * i / end - step * (steps - 1 - i) (start and end in the dtype, not fused
    here) by C's pow (NumPy's float64 power is an ulp off it at times)."""
    npdt = np.dtype(npdt)
    bf16 = npdt == bf16_values.STORAGE      # (c10::BFloat16 bounds and difference, rounded)
    cast = bf16_values.round_to if bf16 else (lambda v: v.astype(npdt))
    if steps <= 1:
        return cast(np.full(steps, math.pow(float(base), float(start))))
    T = bf16_values.round_number if bf16 else npdt.type if npdt.kind == "f" else np.int64
    s, e = T(start), T(end)
    step = float(T(e - s)) / (steps - 1)
    lo, k = _halves(steps)
    x = np.where(lo, float(s) + step * k, float(e) - step * k)
    return cast(np.array([math.pow(float(base), v) for v in x.tolist()]))


def arange_values(start, end, step, npdt):
    """torch.arange(start, end, step) in NumPy dtype npdt, as PyTorch's CPU kernel. Floats:
    in the accumulate type (float64; float32 for float16), each run of 2 * V elements (V =
    32 bytes of the dtype) from a base start + step * i (fused) rounded to the dtype, then
    base + k * step (fused); the remainder start + step * i. (Above 32768 elements PyTorch
    splits the range between threads, which moves the runs: not modelled.)"""
    npdt = np.dtype(npdt)
    if npdt.kind != "f":        # (integer bounds and step: exact)
        return np.arange(start, end, step).astype(npdt)
    n = max(math.ceil((float(end) - float(start)) / float(step)), 0)
    acc = np.float32 if npdt == np.float16 else np.float64
    s, st = float(acc(start)), float(acc(step))
    i = np.arange(n)
    if s.is_integer() and st.is_integer() and \
            max(abs(s), abs(s + st * n)) <= 2.0 ** (np.finfo(npdt).nmant + 1):
        # integer values the dtype holds exactly (positions, arange(65536.0)): every
        # product and sum of the kernel below is exact, so its values are these (60x faster)
        return (s + st * i).astype(npdt)

    def fused(a, b, c):
        if acc is np.float64:
            return fma64(a, b, c)
        return (a * b + c).astype(np.float32)     # (float32 operands: exact in float64)
    width = 32 // npdt.itemsize
    nvec = (n // (2 * width)) * 2 * width
    chunk = (i // width) * width
    base = fused(st, chunk.astype(np.float64), s).astype(npdt).astype(np.float64)
    vec = fused((i - chunk).astype(np.float64), st, base)
    tail = fused(st, i.astype(np.float64), s)
    return np.where(i < nvec, vec, tail).astype(npdt)


def arange_size(start, end, step, npdt):
    """PyTorch's errors for a bad range; then the element count of arange(start, end, step)
    in NumPy dtype npdt when its values are start + step * i exactly (integer bounds and
    step; a float dtype holding every value exactly), so the `arange` op computes them
    (traced: one node, shared between sizes); else None (the kernel's own rounding:
    arange_values)."""
    for name, v in (("start", start), ("end", end), ("step", step)):
        if not hasattr(v, "__float__"):     # (a str, None: not NumPy's ufunc error)
            raise TypeError(f"arange(): argument '{name}' must be Number, not "
                            f"{type(v).__name__}")
    if not (np.isfinite(start) and np.isfinite(end)):
        raise RuntimeError(f"unsupported range: {start} -> {end}")
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if (step > 0 and end < start) or (step < 0 and end > start):
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    if not all(type(v) is int or isinstance(v, float) and v.is_integer() and
               abs(v) < 2.0 ** 53 for v in (start, end, step)):
        return None
    start, end, step = int(start), int(end), int(step)
    n = len(range(start, end, step))
    npdt = np.dtype(npdt)
    if npdt.kind == "f" and max(abs(start), abs(start + step * n)) > 2 ** (np.finfo(npdt).nmant + 1):
        return None
    return n
