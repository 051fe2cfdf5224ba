"""Tensor.__copy__ and __deepcopy__ as copy.copy / copy.deepcopy of a torch.Tensor.

copy.copy: a leaf on the same memory (torch's pickle protocol hands the storage over when
nothing is copied deeply), requiring grad as the tensor does, without its .grad, with its
attributes (shallow).

copy.deepcopy: a non-leaf (a tensor with autograd
history) refuses with PyTorch's error; the tensors of one copy.deepcopy call that share a
storage share one copied storage (views of one base stay views, with their offsets and
strides); .grad is copied (deep); attributes a user set on the tensor are copied (not
grad_dtype, as in PyTorch).
Subclasses (Parameter: its data cloned, no .grad, as torch.nn.Parameter.__deepcopy__),
meta tensors and memory that is not a plain view of its storage keep the pickle path
(Tensor.__reduce_ex__: a copy of the values)."""
import copy

import numpy as np

from . import trace_state
from .tensor import Storage, Tensor, user_attributes

_NON_LEAF = ("Only Tensors created explicitly by the user (graph leaves) support the deepcopy "
             "protocol at the moment.  If you were attempting to deepcopy a module, this may "
             "be because of a torch.nn.utils.weight_norm usage, see "
             "https://github.com/pytorch/pytorch/pull/103001")


def _region(base):
    """(lowest address, the flat array of base's element type spanning base's memory), or
    None when the memory cannot be described so."""
    if base.ndim and any(s < 0 for s in base.strides):
        base = base[tuple(slice(None, None, -1) if s < 0 else slice(None) for s in base.strides)]
    item = base.itemsize
    if base.size == 0 or any(s % item for s in base.strides):
        return None
    span = sum((n - 1) * s for n, s in zip(base.shape, base.strides)) + item
    flat = np.lib.stride_tricks.as_strided(base, shape=(span // item,), strides=(item,),
                                           writeable=False)
    return base.__array_interface__["data"][0], flat


def _copied_view(t, memo):
    """t's data as a view of the copy of its storage (made once per deepcopy call), or None."""
    arr, st = t._data, t._storage
    if type(st) is not Storage or arr.size == 0 or any(s < 0 for s in arr.strides):
        return None
    entry = memo.get(id(st))
    if entry is None:
        region = _region(st.base)
        if region is None:
            return None
        lo, flat = region
        new = flat.copy()
        entry = memo[id(st)] = (lo, new, Storage(new))
        memo.setdefault(id(memo), []).append(st)      # (kept alive: its id stays its own)
    lo, new, storage = entry
    if arr.dtype != new.dtype:
        return None
    item = arr.itemsize
    delta = arr.__array_interface__["data"][0] - lo
    extent = delta + sum((n - 1) * s for n, s in zip(arr.shape, arr.strides)) + item
    if delta < 0 or delta % item or extent > new.nbytes:
        return None
    view = np.lib.stride_tricks.as_strided(new[delta // item:], shape=arr.shape,
                                           strides=arr.strides)
    return Tensor._from_array(view, storage)


def __deepcopy__(self, memo):
    if not self.is_leaf:
        raise RuntimeError(_NON_LEAF)
    hit = memo.get(id(self))
    if hit is not None:
        return hit
    if type(self) is not Tensor or self.is_meta:
        rv = self.__reduce_ex__(4)
        return copy._reconstruct(self, memo, *rv)
    if trace_state.state.tracer is not None:
        trace_state.state.tracer.graph_break("a copy of a tensor's values by pickle or "
                                             "copy.deepcopy")
    new = _copied_view(self, memo)
    if new is None:
        new = Tensor._from_array(np.array(self._data))
    new._requires_grad = self.requires_grad
    memo[id(self)] = new
    if self._grad is not None:
        new._grad = copy.deepcopy(self._grad, memo)
    d = user_attributes(self)
    if d:
        new.__dict__.update(copy.deepcopy(d, memo))
    return new


def __copy__(self):
    if type(self) is not Tensor or self.is_meta:
        return copy._reconstruct(self, None, *self.__reduce_ex__(4))
    if trace_state.state.tracer is not None:
        trace_state.state.tracer.graph_break("copy.copy of a tensor")
    new = self._alias()
    new._requires_grad = self.requires_grad
    new.__dict__.update(user_attributes(self))
    return new


Tensor.__deepcopy__ = __deepcopy__
Tensor.__copy__ = __copy__
