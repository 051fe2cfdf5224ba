"""median's picks: median() over all elements (the lower median, or the first nan, its
gradient spread evenly over the elements equal to it, as PyTorch's
evenly_distribute_backward), and median(dim)'s index from the values by np.partition where
the data is a float NumPy array run eagerly (the element a stable sort of the slice puts at
(n - 1) // 2, or its first nan: a sort of every slice was 3-4x slower)."""
import math

import numpy as np

from . import dispatch, dtypes, trace_state
from .creation import full_op
from .dtype_info import iinfo
from .functions import where


def no_bool(x, kernel):
    if x._dtype is dtypes.bool_:
        raise NotImplementedError(f"\"{kernel}\" not implemented for 'Bool'")


def median_all(x, ignore_nan, name):
    n = x._data.size
    if n == 0:                  # (PyTorch's nan, on the graph; for integers nan cast to one:
        if x._dtype.is_floating_point:      # int32's lowest value, wrapped to 0 in int8 / int16;
            return x.sum() + math.nan       # True for bools, no kernel run)
        if x._dtype is dtypes.bool_:
            return full_op((), True, x._dtype)
        return full_op((), iinfo(x._dtype).min if x._dtype.itemsize >= 4 else 0, x._dtype)
    no_bool(x, "median_cpu")            # (nanmedian's kernel too)
    s = x.reshape(-1).sort(stable=True).values
    if not x._dtype.is_floating_point:
        return s.narrow(0, (n - 1) // 2, 1).reshape(())
    nans = s.isnan().sum()
    if ignore_nan:
        pos = where(nans < n, (n - 1 - nans).div(2, rounding_mode="floor"), 0)
    else:
        pos = where(nans > 0, n - nans, (n - 1) // 2)
    v = s.gather(0, pos.reshape(1)).reshape(()).detach()
    # the value again, as a reduction over the elements equal to it whose gradient is
    # spread evenly over them, as PyTorch's evenly_distribute_backward: an amax (exact) for
    # a number, a mean for a nan (amax's gradient does not see nans as equal)
    hit = x == v
    number = x.masked_fill(~hit, -math.inf).amax()
    at_nan = x.isnan() & v.isnan()
    return where(v.isnan(), x.masked_fill(~at_nan, 0).sum() / at_nan.sum().clamp_min(1),
                 number)


def eager_numpy(x):
    """x a float tensor of a NumPy array, run eagerly (nothing traces or batches its ops: a
    value computed from its data would be a constant there)."""
    return x._dtype.is_floating_point and not x._dtype.is_complex and \
        trace_state.state.tracer is None and dispatch.batching is None and \
        type(x._data) is np.ndarray and x._data.dtype.kind == "f"


def median_index(a, d):
    """The index along d (kept, size 1) of median(dim)'s pick: the element at position
    (n - 1) // 2 of a stable sort of the slice (among equal values the (pos - #less)-th in
    index order), or its first NaN: the slice's value there by np.partition."""
    xs = np.moveaxis(a, d, -1)
    pos = (xs.shape[-1] - 1) // 2
    v = np.partition(xs, pos, axis=-1)[..., pos:pos + 1]
    with np.errstate(invalid="ignore"):
        nan = np.isnan(xs)
        eq = xs == v
        rank = pos - (xs < v).sum(-1)
    has_nan = nan.any(-1)
    idx = np.where(has_nan, nan.argmax(-1), eq.argmax(-1))
    tied = ~has_nan & (eq.sum(-1) > 1)
    for at in zip(*np.nonzero(tied)) if tied.ndim else [()] if tied else ():
        idx[at] = np.nonzero(eq[at])[0][rank[at]]
    return np.ascontiguousarray(np.moveaxis(idx.astype(np.int64)[..., None], -1, d))
