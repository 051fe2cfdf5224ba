"""Float sums over axes NumPy would add in sequence, in blocks instead (PyTorch's cascade).

NumPy's reduce adds pairwise only along the axis its inner loop runs on, the innermost in
memory; along any other reduced axis it adds one slice after another into the running
totals, so the rounding error grows with that axis's length: float32 x.sum(0) of a
row-major (100000, 8) of values in [0, 0.9) was off by 8e-6 relative, PyTorch's cascade sum
by 8e-8 (a Linear's bias gradient over a long batch is such a sum). Such an axis is cut
into blocks of BLOCK elements, each added in sequence (one pass NumPy runs vectorised along
the other axes), and the block totals added in float64 (float32 sums; float64's level by
level the same way): about one plain reduce's time (1.0-1.3x for 20,000 rows or more). A
float32 sum of at most SMALL elements is added in float64 whole (one einsum: the blocks'
Python cost was 3-5x NumPy's reduce of 300-2,000 rows). Sums NumPy adds pairwise, or in
sequence over fewer than SEQUENTIAL_FROM elements, keep NumPy's order and bits
(tests/runtime/test_reduction_accuracy_s66_r1.py, tests/ir/test_np_sums_s66_r1.py)."""
import functools
import math

import numpy as np

try:        # (np.einsum's Python wrapper was a third of a 300-row sum's time)
    from numpy._core.multiarray import c_einsum as _einsum
except ImportError:     # pragma: no cover (NumPy 1.x)
    _einsum = np.einsum

BLOCK = 32
SEQUENTIAL_FROM = 256
SMALL = 1 << 15
WIDE_FROM = 16
SHORT_LAST, SHORT_LAST_ROWS = 7, 256     # (middle_sum's short last axis)
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.complex64),
           np.dtype(np.complex128))
_EINSUM = _FLOATS[:2]
_WIDER = {np.dtype(np.float32): np.dtype(np.float64),
          np.dtype(np.complex64): np.dtype(np.complex128)}
_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def _memory_groups(x, dims):
    """x's axes of extent > 1, innermost in memory last, with reduced axes NumPy's iterator
    would coalesce (adjacent in memory, reduced both) grouped: [[axis, ...], ...]."""
    shape, strides = x.shape, x.strides
    axes = sorted((a for a in range(x.ndim) if shape[a] > 1),
                  key=lambda a: abs(strides[a]), reverse=True)
    groups = []
    for a in axes:
        last = groups[-1][-1] if groups else None
        if last is not None and last in dims and a in dims and \
                strides[last] == strides[a] * shape[a]:
            groups[-1].append(a)
        else:
            groups.append([a])
    return groups


@functools.lru_cache(maxsize=256)
def _subscripts(ndim, ax):
    s = _LETTERS[:ndim]
    return f"{s}->{s[:ax]}{s[ax + 1:]}"


def _reduce(a, ax, dtype):
    """np.add.reduce(a, axis=ax, dtype=dtype); by einsum (the same additions in sequence,
    3-30x faster where the elements after ax are few: NumPy's reduce runs an inner loop
    per row there) for a float32/float64 sum in its dtype."""
    if (dtype is None or dtype == a.dtype) and a.dtype in _EINSUM and a.ndim <= 26 and \
            math.prod(a.shape[ax + 1:]) <= 64:
        return _einsum(_subscripts(a.ndim, ax), a)
    return np.add.reduce(a, axis=ax, dtype=dtype)


def _cascade(a, ax, dtype):
    """a summed over axis ax (dropped): blocks of BLOCK elements added in sequence, more
    than WIDE_FROM block totals of a float32 (complex64) sum in float64 (complex128) and
    rounded once (fewer in sequence: the round trip was a third of the time of 512 rows'
    sum), else level by level in the same way."""
    n, shape = a.shape[ax], a.shape
    if n <= 2 * BLOCK:
        return _reduce(a, ax, dtype)
    m = n // BLOCK
    split = shape[:ax] + (m, BLOCK) + shape[ax + 1:]
    if m * BLOCK == n:
        blocks, tail = _reduce(a.reshape(split), ax + 1, dtype), None
    else:
        lead = (slice(None),) * ax
        blocks = _reduce(a[lead + (slice(0, m * BLOCK),)].reshape(split), ax + 1, dtype)
        tail = _reduce(a[lead + (slice(m * BLOCK, n),)], ax, dtype)
    wide = _WIDER.get(blocks.dtype) if m > WIDE_FROM else None
    total = _cascade(blocks, ax, None) if wide is None else \
        _reduce(blocks.astype(wide), ax, None)
    if tail is not None:
        total += tail
    return total if wide is None else total.astype(blocks.dtype)


def cascade_sum(x, dim, keepdim, dtype=None):
    """np.add.reduce(x, axis=dim, keepdims=keepdim, dtype=dtype) of a float x, in blocks
    along the axes NumPy would add in sequence (SEQUENTIAL_FROM elements or more); None
    where NumPy's own order is kept (the caller reduces as before)."""
    nd, shape = x.ndim, x.shape
    if x.size < SEQUENTIAL_FROM or nd == 0 or (dim is None and x.flags.c_contiguous):
        return None         # (the checks of every eager sum's call: cheapest first)
    if isinstance(dim, int):
        dim = (dim,)
    if dim is not None and len(dim) == 1 and (shape[dim[0]] < SEQUENTIAL_FROM or (
            dim[0] % nd == nd - 1 and x.flags.c_contiguous)):
        return None         # (a row-major array's last axis: NumPy adds it pairwise)
    dims = set(range(nd)) if dim is None else {d % nd for d in dim}
    if math.prod(shape[d] for d in dims) < SEQUENTIAL_FROM:
        return None
    out_dt = x.dtype if dtype is None else np.dtype(dtype)
    if x.dtype not in _FLOATS or out_dt not in _FLOATS or out_dt.kind != x.dtype.kind:
        return None
    groups = _memory_groups(x, dims)
    if not groups:
        return None
    inner = groups[-1] if groups[-1][0] in dims else []
    outer = [a for g in groups for a in g if a in dims and a not in inner]
    if math.prod(x.shape[a] for a in outer) < SEQUENTIAL_FROM:
        return None
    wide = _WIDER.get(out_dt)
    if wide is not None and x.size <= SMALL:
        if inner or len(outer) > 1:
            r = np.add.reduce(x.astype(wide), axis=tuple(dims))
        else:
            r = _reduce(x.astype(wide), outer[0], None)
        r = np.asarray(r).astype(out_dt)
    else:
        r, dt, left = x, dtype, list(range(x.ndim))
        if inner:                       # (NumPy's pairwise sum along memory)
            r, dt = np.add.reduce(x, axis=tuple(inner), dtype=dtype), None
            left = [a for a in left if a not in inner]
        for a in sorted(outer, key=lambda a: -x.shape[a]):
            r, dt = _cascade(r, left.index(a), dt), None
            left.remove(a)
        r = np.asarray(r)
    if keepdim:
        return r.reshape(tuple(1 if i in dims else n for i, n in enumerate(x.shape)))
    # (reduced axes of extent 1 are still in r: the reshape drops them)
    return r.reshape(tuple(n for i, n in enumerate(x.shape) if i not in dims))


def short_last_sum(x):
    """np.add.reduce(x, axis=-1) of a C-contiguous float x whose last axis has 2 to
    SHORT_LAST elements, as column adds: NumPy's reduce runs an inner loop of those few
    elements per row (the w-pass of adaptive_avg_pool2d(8x64x32x32, 7): 7x the adds' time);
    it adds fewer than 8 in sequence onto its identity, as these do (+0.0 last: the same
    bits, a sum of -0.0s +0.0 as NumPy's)."""
    r = np.add(x[..., 0], x[..., 1])
    for j in range(2, x.shape[-1]):
        np.add(r, x[..., j], out=r)
    return np.add(r, 0.0, out=r)


def middle_sum(x, dim, keepdim):
    """np.add.reduce(x, axis=dim) where dim is one axis with 2 to 64 elements after it in a
    C-contiguous float array, by einsum; else None. NumPy's reduce makes an inner loop of
    those few elements per reduced element there (x.sum(1) of (64, 128, 16): 19x torch's
    time); einsum adds along the axis in the same order, so the values are the same bits.
    The last axis, when short and over many rows: short_last_sum."""
    if dim is None or len(dim) != 1 or x.dtype not in _EINSUM or x.ndim > 26 or \
            not x.flags.c_contiguous:
        return None
    ax = dim[0]
    if x.ndim and ax % x.ndim == x.ndim - 1 and 2 <= x.shape[-1] <= SHORT_LAST and \
            x.size >= SHORT_LAST_ROWS * x.shape[-1]:
        r = short_last_sum(x)
    elif not 2 <= math.prod(x.shape[ax + 1:]) <= 64:
        return None
    else:
        s = _LETTERS[:x.ndim]
        r = np.einsum(f"{s}->{s[:ax]}{s[ax + 1:]}", x)
    if not keepdim:
        return r
    # (the reshape np.expand_dims makes, without its ~1.5 us of axis normalisation)
    return r.reshape(x.shape[:ax] + (1,) + x.shape[ax + 1:]) if ax >= 0 else \
        np.expand_dims(r, ax)
