"""NumPy arrays a compiled function reads (from its arguments, objects, globals), as the
tensor inputs the trace reads them through."""
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
    bases = [x._storage.base for _, x in items if isinstance(x, Tensor)]
    made, out = {}, []
    for path, x in items:
        if type(x) is np.ndarray:
            if id(x) in made:
                x = made[id(x)]
            elif any(np.may_share_memory(x, b) for b in bases):
                continue
            else:
                bases.append(x)
                t = made[id(x)] = Tensor._from_array(x)
                t.__dict__["_llgrad_array"] = x     # (the wrapper of x: identity)
                x = t
        out.append((path, x))
    return out
