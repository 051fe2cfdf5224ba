"""np.cumsum (and np.cumprod) for the cumsum (and cumprod) op's NumPy implementation, by a
loop of slice adds (multiplies) along the summed dimension where that dimension is not the
innermost and every step's slice is long. NumPy's accumulate walks such a dimension element
by element with strides (with the cast to the accumulation dtype buffered on the way): a
linear-attention LM's cumsum over time of its key-value outer products, (16, 4, 64, 16, 16)
float32 summed in float64, took 16 ms, a loop of 63 adds over contiguous (16, 4, 256) slices
2 ms. Both sum (multiply) each position's terms one at a time in order in the accumulation
dtype (r[i] = r[i - 1] + x[i]), so the values are the same bits."""
import numpy as np

# the loop when the array has this many elements and each slice this many (below, NumPy's
# own accumulate costs less than a Python-level add per step)
_MIN_SIZE, _MIN_SLICE = 8192, 256
# (float16's sums, in float32, left to NumPy: its buffered cast gave another sign to a NaN
# that inf - inf makes, so the loop would differ there in that bit)
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def cumsum(x, dim, acc, _ufunc=np.add):
    """np.cumsum(x, axis=dim, dtype=acc)."""
    n = x.shape[dim] if x.ndim else 1
    if x.dtype not in _FLOATS or x.ndim < 2 or dim % x.ndim == x.ndim - 1 or n < 2 or \
            x.size < _MIN_SIZE or x.size // n < _MIN_SLICE:
        return (np.cumsum if _ufunc is np.add else np.cumprod)(x, axis=dim, dtype=acc)
    r = x.astype(acc)                   # (a fresh C-ordered copy in the accumulation dtype)
    steps = np.moveaxis(r, dim, 0)
    for i in range(1, n):
        _ufunc(steps[i - 1], steps[i], out=steps[i])
    return r


def cumprod(x, dim, acc):
    """np.cumprod(x, axis=dim, dtype=acc), by the same loop where cumsum takes it (each
    position's products one at a time in order in the accumulation dtype: the same bits)."""
    return cumsum(x, dim, acc, np.multiply)
