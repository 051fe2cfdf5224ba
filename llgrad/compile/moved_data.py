"""`p.data = y` inside a compiled function: p (an input, or a tensor the function reaches,
such as a parameter) is given the memory of a tensor y made inside, the sparse
autoencoder's `self.W_dec.data = W_dec_normed`. The traced run ends with p holding y's
memory (and whatever was written there after); a compiled call gives p that value as a
fresh output buffer of its own, with the version counter eager's run leaves on it.

That is eager's state exactly when nothing else holds y's memory: not another input, not
a returned tensor, not a tensor put into an object, and y covers its whole buffer in C
order (so p's strides are eager's). Other cases run eagerly (TraceError)."""
import numpy as np

from ..runtime.tensor import Tensor
from ..tracer.errors import TraceError


def moved_outputs(entry, tensors, storages, outs, n_grad_outs):
    """The inputs given other memory in the traced run, as extra outputs (after the .grad
    ones); sets entry.data_assign [(input, output position after n_fn_out, version)]."""
    moved = [k for k, ((_, t), st) in enumerate(zip(tensors, storages)) if t._storage is not st]
    entry.data_assign = []
    if not moved:
        return []
    held = {id(st.base) for st in storages}
    held.update(id(t._storage.base) for k, (_, t) in enumerate(tensors) if k not in moved)
    own = {id(tensors[k][1]) for k in moved}     # (`return p`: p itself, as run.py gives it)
    held.update(id(o._storage.base) for o in outs if isinstance(o, Tensor) and id(o) not in own)
    data_outs = []
    for k in moved:
        path, t = tensors[k]
        base = t._storage.base
        if id(base) in held or not t._data.flags.c_contiguous or t._data.size != base.size:
            raise TraceError(f"{path} was given other memory (`.data = ...`) that other "
                             "tensors share, which a compiled call cannot replay")
        held.add(id(base))
        entry.data_assign.append((k, n_grad_outs + len(data_outs), t._storage.version))
        data_outs.append(t)
    return data_outs


def assign_moved(entry, tensors, outs, taken):
    """A compiled call's `p.data = y`: p gets its new value's buffer (run.py)."""
    for k, pos, version in entry.data_assign:
        arr = outs[entry.n_fn_out + pos]
        if arr.base is not None or id(arr) in taken or not arr.flags.c_contiguous:
            arr = np.array(arr, order="C")
        taken.add(id(arr))
        new = Tensor._from_array(arr)
        new._storage.version = version
        t = tensors[k]
        t._data, t._storage = new._data, new._storage
