"""searchsorted and bucketize: PyTorch's binary search, run in NumPy eagerly and as whole-tensor
ops while traced (so a trace records it)."""
import numpy as np

from . import dispatch, dtypes, trace_state
from .creation import tensor as _tensor
from .functions import export, where
from .tensor import Tensor
from .vmap_fallback import values_read


@values_read
def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None,
                 sorter=None):
    """As torch.searchsorted: for each value, the index of the first element of the sorted
    last dim of sorted_sequence that is >= it (> it with right=True or side='right'); nan
    goes last (PyTorch's binary search: in NumPy eagerly, as tensor ops traced)."""
    dtypes.no_bool_kernel((sorted_sequence,), "searchsorted_out_cpu")
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"torch.searchsorted(): side can only be 'left' or 'right' but "
                               f"got {side}")
        if right and side == "left":
            raise RuntimeError("torch.searchsorted(): side and right can't be set to opposites, "
                               "got side of left while right was True")
        right = side == "right"
    seq = sorted_sequence if sorter is None else sorted_sequence.gather(-1, sorter)
    values = input if isinstance(input, Tensor) else _tensor(input)
    sb, vb = tuple(seq._data.shape[:-1]), tuple(values._data.shape[:-1])
    if seq._data.ndim > 1 and (sb != vb or values._data.ndim == 0):
        raise RuntimeError("torch.searchsorted(): boundaries tensor should be 1 dimension or "
                           "the first N-1 dimensions of boundaries tensor and input value "
                           "tensor must match, but we got boundaries tensor "
                           f"{list(seq._data.shape)} and input value tensor "
                           f"{list(values._data.shape)}")
    found = _binary_search(seq, values, right)
    if found is None:
        found = _traced_search(seq, values, right)
    return found.int() if out_int32 else found


def _traced_search(seq, values, right):
    """_binary_search as whole-tensor ops, which a trace records: PyTorch's result for any
    boundaries (a count of comparisons differs past a NaN or out of order)."""
    m = seq._data.shape[-1]
    lo = values.new_zeros(values._data.shape, dtype=dtypes.int64)
    hi = lo + m
    if not m:
        return lo
    for _ in range(m.bit_length()):         # (each round halves every live range)
        mid = (lo + hi) // 2
        live = lo < hi
        k = mid.clamp(max=m - 1)
        at = seq.gather(-1, k) if seq._data.ndim > 1 else seq[k]
        # (lower bound: go right while !(mid >= v); upper bound: while !(mid > v))
        go = ~(at > values) if right else ~(at >= values)
        lo = where(live & go, mid + 1, lo)
        hi = where(live & ~go, mid, hi)
    return lo


def _binary_search(seq, values, right):
    """searchsorted as PyTorch's CPU kernel searches, all values at once: log2(m) vectorised
    halvings, not n x m comparisons (65,536 boundaries and 4,096 values took 180 ms and
    1 GiB that way). Eagerly; None traced or batched (then _traced_search)."""
    a, v = seq._data, values._data
    if trace_state.state.tracer is not None or dispatch.batching is not None or \
            not a.size or not v.size:
        return None
    m = a.shape[-1]
    rows = a.reshape(-1, m) if a.ndim > 1 else a.reshape(1, m)
    vals = v.reshape(len(rows), -1) if a.ndim > 1 else v.reshape(1, -1)
    row = np.arange(len(rows))[:, None]
    lo = np.zeros(vals.shape, np.int64)
    hi = np.full(vals.shape, m, np.int64)
    with np.errstate(invalid="ignore"):
        while True:
            live = lo < hi
            if not live.any():
                break
            mid = lo + ((hi - lo) >> 1)
            at = rows[row, np.minimum(mid, m - 1)]
            # (lower bound: go right while !(mid >= v); upper bound: while !(mid > v))
            go = ~(at > vals) if right else ~(at >= vals)
            lo = np.where(live & go, mid + 1, lo)
            hi = np.where(live & ~go, mid, hi)
    return _tensor(lo.reshape(v.shape))


def bucketize(input, boundaries, *, out_int32=False, right=False):
    """As torch.bucketize: searchsorted of input's values in the 1-D boundaries."""
    if boundaries._data.ndim != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim("
                           f"{boundaries._data.ndim})")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


for _f in (searchsorted, bucketize):
    export(_f)
del _f
