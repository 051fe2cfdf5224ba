"""NumPy arrays a compiled function reads (from its arguments, objects, globals), as the
tensor inputs the trace reads them through."""
import bisect

import numpy as np

from ..runtime.dtypes import _BY_NP
from ..runtime.tensor import Tensor


def wrappable(arr):
    """Whether from_numpy takes arr."""
    return arr.dtype in _BY_NP and arr.dtype.isnative and \
        all(s >= 0 and s % arr.itemsize == 0 for s in arr.strides)


def arrays_as_tensors(items):
    """The walk's [(path, Tensor or ndarray)] with each array a tensor over it, except an
    array that shares memory with a tensor or an array before it (a global array that an
    argument wraps with from_numpy): the tracer finds that tensor's memory instead."""
    if not any(type(x) is np.ndarray for _, x in items):
        return items
    bases, others = _Extents(), []
    for _, x in items:
        if isinstance(x, Tensor):
            b = x._storage.base
            bases.add(b) if type(b) is np.ndarray else others.append(b)
    made, out = {}, []
    for path, x in items:
        if type(x) is np.ndarray:
            if id(x) in made:
                x = made[id(x)]
            elif bases.meets(x) or any(np.may_share_memory(x, b) for b in others):
                continue
            else:
                bases.add(x)
                t = made[id(x)] = Tensor._from_array(x)
                t.__dict__["_llgrad_array"] = x     # (the wrapper of x: identity)
                x = t
        out.append((path, x))
    return out


def walker_arrays(items):
    """A guard walker's inputs (guard_walker.py) with each array a tensor over it, as
    arrays_as_tensors makes them; None where it leaves one out (memory another input has)."""
    out = arrays_as_tensors([(None, x) for x in items])
    return [x for _, x in out] if len(out) == len(items) else None


def _byte_bounds(a):
    """[low, high) of the bytes a spans, or None where it has no elements."""
    return np.lib.array_utils.byte_bounds(a) if a.size else None


class _Extents:
    """The byte ranges of arrays, merged where they meet: whether an array's range meets one
    (np.may_share_memory's bounds test against each) by bisection, not a pass over them all
    (a SAC's replay memory: 7,500 arrays made that 28 million tests, 8 s a call)."""

    def __init__(self):
        self.low, self.high = [], []    # (disjoint, sorted: both lists ascend)

    def meets(self, a):
        bounds = _byte_bounds(a)
        if bounds is None:
            return False
        low, high = bounds
        i = bisect.bisect_right(self.low, low)      # (ranges starting at or before low)
        return (i > 0 and self.high[i - 1] > low) or (i < len(self.low) and self.low[i] < high)

    def add(self, a):
        bounds = _byte_bounds(a)
        if bounds is None:
            return
        low, high = bounds
        i = bisect.bisect_left(self.high, low)      # (the first range ending at or after low)
        j = bisect.bisect_right(self.low, high)     # (past the last starting at or before high)
        if i < j:
            low, high = min(low, self.low[i]), max(high, self.high[j - 1])
        self.low[i:j], self.high[i:j] = [low], [high]
