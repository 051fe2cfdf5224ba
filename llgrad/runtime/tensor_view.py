"""Tensor._view_of: a new tensor over src's storage with the NumPy view arr as its memory,
carrying PyTorch's view bookkeeping (the base, the version seen, the creation mode). Every
eager view (slicing, unsqueeze, t, select, ...) is made here, so it is Tensor._from_array
inlined, without the thread-local read of the inference mode a view takes from src: the call
and that read were ~40% of a view's making."""
import numpy as np

from . import dtypes, grad_mode

_new_object = object.__new__
_BY_NP = dtypes._BY_NP
_grad_state = grad_mode.state       # (the thread-local object itself: it is never replaced)


def view_of(cls, arr, src):
    """What cls._from_array(arr, src._storage) makes, as a view of src."""
    if type(arr) is not np.ndarray:
        arr = np.asarray(arr)
    t = _new_object(cls)
    t._data = arr
    t._storage = storage = src._storage
    try:
        t._dtype = _BY_NP[arr.dtype]
    except KeyError:
        raise dtypes.unsupported(arr.dtype) from None
    t._requires_grad = t._retains_grad = t._multi_view = False
    t._grad = t._grad_fn = t._hooks = t._acc = None
    t._output_nr = 0
    base = src._base
    t._base = base if base is not None else src
    t._view_version = storage.version
    # a view of an inference tensor is one; a view of a normal tensor is normal, even
    # when made in inference mode
    inference = t._inference = src._inference
    if not inference:
        st = _grad_state
        prev = src._creation
        if st.inference:
            t._creation = "inference"
        elif not st.grad_enabled:
            t._creation = prev if prev == "inference" else "no_grad"
        elif prev is not None:
            t._creation = prev           # a view of such a view inherits its mode
        elif src._multi_view:
            t._multi_view = True         # (and of an output of split, unbind, ...)
    return t
