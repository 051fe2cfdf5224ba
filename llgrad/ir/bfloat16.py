"""bfloat16 values in NumPy, which has no bfloat16 dtype.

A bfloat16 tensor's memory is a float32 array of the opposite byte order ('>f4' on this
little-endian machine) whose every value is a bfloat16 value: a dtype NumPy computes with
correctly (it swaps bytes as it reads) but that no other llgrad dtype uses, so the array
itself says its elements are bfloat16 (Tensor._from_array reads the dtype from it), every
view and copy of it keeps that, and any computation NumPy does on it returns a plain
float32 array. Ops compute as PyTorch's CPU kernels compute bfloat16: on float32 values,
the result rounded once to the nearest bfloat16 (ties to even), which `round_to` does.
Native code is never given such an array: its byte order is not the machine's."""
import numpy as np

STORAGE = np.dtype(np.float32).newbyteorder("S")      # float32, the machine's order swapped
_F32 = np.dtype(np.float32)


def is_storage(a):
    """Whether NumPy array a holds bfloat16 values."""
    return getattr(a, "dtype", None) == STORAGE


def round_to(x):
    """x (any real array or number) rounded to bfloat16, as a STORAGE array: through float32
    (PyTorch's conversions go through float), then to the nearest bfloat16, ties to even;
    a NaN stays a NaN (PyTorch's canonical one), an overflow becomes inf. A STORAGE array
    is rounded too: NumPy makes one of any values (astype), so none is trusted. The result
    is laid out as x is."""
    f = np.asarray(x)
    f = np.asarray(f, dtype=_F32) if f.dtype.kind != "c" else f.real.astype(_F32)
    bits = f.view(np.uint32) if f.flags.c_contiguous else np.ascontiguousarray(f).view(np.uint32)
    lsb = (bits >> 16) & 1
    rounded = (bits + np.uint32(0x7FFF) + lsb) & np.uint32(0xFFFF0000)
    rounded = np.where(np.isnan(f), np.uint32(0x7FC00000), rounded)
    rounded = rounded.reshape(f.shape).view(_F32)
    if f.flags.c_contiguous or not f.ndim:
        return rounded.astype(STORAGE)
    out = np.empty_like(f, dtype=STORAGE)       # (f's layout kept: channels-last stays so)
    out[...] = rounded
    return out


def round_number(v):
    """A Python float rounded to the nearest bfloat16 (a Python float)."""
    return float(round_to(np.float32(v)))


def to_float32(a):
    """The float32 values of a bfloat16 array (exact), in the machine's byte order."""
    return a.astype(_F32)


def next_after(a, b):
    """The bfloat16 next to each bfloat16 value of a towards b's (b's where they are equal),
    as c10's nextafter steps bfloat16's bits: a STORAGE array. a, b: float32 values."""
    a, b = np.broadcast_arrays(np.asarray(a, _F32), np.asarray(b, _F32))
    hi = np.ascontiguousarray(a).view(np.uint32) >> 16
    away = np.where(a > 0, b > a, b < a)            # (away from zero: the magnitude grows)
    bits = np.where(away, hi + 1, hi - 1)
    bits = np.where(a == 0, np.where(b < 0, 0x8001, 0x0001), bits).astype(np.uint32)
    out = np.where(a == b, b, (bits << 16).view(_F32))
    return round_to(np.where(np.isnan(a) | np.isnan(b), np.float32(np.nan), out))


def _rounded(x):
    """x (a float32 temporary holding sums of bfloat16 values) rounded to bfloat16 in place,
    ties to even (a NaN of such sums stays one), returned."""
    u = x.view(np.uint32)
    u += np.uint32(0x7FFF) + ((u >> 16) & np.uint32(1))
    u &= np.uint32(0xFFFF0000)
    return x


def _still_moving(flat, at, values, rank):
    """The terms (at, values, rank) of the targets some term of which changes the target's
    value: a target none of whose terms moves it keeps its value to the end."""
    s = flat[at]
    stays = _rounded(s + values).view(np.uint32) == s.view(np.uint32)
    keep = np.isin(at, at[~stays])
    return at[keep], values[keep], rank[keep]


def add_in_order(flat, at, values):
    """flat[at[k]] = bfloat16(flat[at[k]] + values[k]) for k = 0, 1, ... in order, as a
    kernel adding into bfloat16 one term at a time does (flat, values: float32 holding
    bfloat16 values; flat written): one pass per term of the busiest target, every target
    at once, a target dropped once no term left moves it (ones added past 256)."""
    order = np.argsort(at, kind="stable")
    at, values = at[order], values[order]
    first = np.r_[0, np.flatnonzero(at[1:] != at[:-1]) + 1]
    rank = np.arange(at.size) - np.repeat(first, np.diff(np.r_[first, at.size]))
    by_rank = np.argsort(rank, kind="stable")
    at, values, rank = at[by_rank], values[by_rank], rank[by_rank]
    a, r, check = 0, 0, 64
    while a < at.size:
        if r == check:
            at, values, rank = _still_moving(flat, at[a:], values[a:], rank[a:])
            a, check = 0, check * 4
            continue
        b = int(np.searchsorted(rank, r, "right"))
        t = at[a:b]
        flat[t] = _rounded(flat[t] + values[a:b])
        a, r = b, r + 1
    return flat
