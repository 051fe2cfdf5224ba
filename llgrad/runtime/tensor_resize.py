"""Tensor.new (PyTorch's legacy constructor of a tensor of self's dtype) and Tensor.resize_ /
resize_as_.

resize_ gives self a contiguous (or, by memory_format, channels-last) shape over its own
storage from its storage offset on, as PyTorch's: shrinking or reshaping within the storage
keeps the memory (and what other views see of it); growing it needs a bigger buffer, which
llgrad can only give a storage no other tensor shares (PyTorch reallocates under every view:
llgrad cannot move the memory under a NumPy view), and a NumPy array given to from_numpy
cannot grow (PyTorch's error). New elements are zeros (PyTorch leaves them uninitialised). A
tensor that requires grad cannot be resized; inside llgrad.compile resize_ runs eagerly (a
graph break)."""
import sys

import numpy as np

from . import dtypes, trace_state
from .creation import empty, tensor
from .device import check as check_device
from ..ir.ops_copy import CHANNELS_LAST
from .functions import export
from .memory_formats import op_format
from .meta_tensor import MetaStorage, meta_buffer
from .shapes import unpack_shape
from .tensor import Size, Tensor

_C_NAMES = {"float64": "double", "float32": "float", "float16": "c10::Half",
            "int64": "long int", "int32": "int", "int16": "short int", "int8": "signed char",
            "uint8": "unsigned char", "bool": "bool", "bfloat16": "c10::BFloat16"}


def _options(dt):
    return (f"TensorOptions(dtype={_C_NAMES[dt.name]}, device=cpu, layout=Strided, "
            "requires_grad=false (default), pinned_memory=false (default), "
            "memory_format=(nullopt))")


def _type_names(args, kwargs):
    names = [type(a).__name__ if not isinstance(a, Tensor) else "Tensor" for a in args]
    names += [f"{k}={'torch.dtype' if isinstance(v, dtypes.dtype) else type(v).__name__}"
              for k, v in kwargs.items()]
    return ", ".join(names)


def new(self, *args, **kwargs):
    """As torch.Tensor.new: a tensor of self's dtype from sizes (ints or one Size: zeros here,
    uninitialised in PyTorch), data (a list or tuple), or a tensor of self's dtype (an alias
    of it); nothing gives an empty one."""
    device = kwargs.pop("device", None)
    if kwargs:
        raise TypeError(f"new() received an invalid combination of arguments - got "
                        f"({_type_names(args, kwargs)}), but expected one of:")
    check_device(device)
    dt = self._dtype
    if not args:
        return empty(0, dtype=dt)
    if len(args) == 1 and isinstance(args[0], Size) or all(
            isinstance(a, int) and not isinstance(a, bool) for a in args):
        return empty(args[0] if isinstance(args[0], Size) else args, dtype=dt)
    if len(args) == 1 and isinstance(args[0], Tensor):
        t = args[0]
        if t._dtype is not dt:
            raise TypeError(f"expected {_options(dt)} (got {_options(t._dtype)})")
        return t.detach()
    if len(args) > 1:
        k = next(i for i, a in enumerate(args) if not isinstance(a, int) or isinstance(a, bool))
        raise TypeError(f"new(): argument 'size' failed to unpack the object at pos {k + 1} "
                        f"with error \"type must be tuple of ints,but got "
                        f"{type(args[k]).__name__}\"")
    data = args[0]
    if isinstance(data, str):
        raise TypeError("new(): invalid data type 'str'")
    if not isinstance(data, (list, tuple, range, np.ndarray)):     # (a range is one)
        raise TypeError(f"new(): data must be a sequence (got {type(data).__name__})")
    arr = np.asarray(data)
    if arr.dtype.kind == "f" and not dt.is_floating_point:
        arr = np.trunc(arr)             # (LongTensor data 1.7 is 1, as PyTorch's)
    return tensor(arr, dtype=dt)


def _memory_order(storage, dt):
    """The storage's buffer as a 1-d array in memory order, or None when it is not a dense
    buffer of dt's itemsize (a channels-last buffer is dense in a permuted order)."""
    base = storage.base
    if base.dtype.itemsize != dt.np.itemsize:     # (bfloat16's memory: 4-byte words)
        return None
    dense = base.transpose(sorted(range(base.ndim), key=lambda d: -base.strides[d]))
    return dense.reshape(-1) if dense.flags.c_contiguous else None


def _format(memory_format, ndim):
    if memory_format is not None and memory_format == "preserve_format":
        raise RuntimeError("Unsupported memory formatPreserve")
    return op_format(memory_format, ndim)


def resize_(self, *size, memory_format=None):
    """As torch.Tensor.resize_ (see the module: growing needs an unshared storage)."""
    if self.requires_grad:
        raise RuntimeError("cannot resize variables that require grad")
    shape = tuple(unpack_shape(size))
    if any(n < 0 for n in shape):
        raise RuntimeError("numel: integer multiplication overflow")
    fmt = _format(memory_format, len(shape))
    same = shape == tuple(self._data.shape)
    if same and memory_format is None:
        # (PyTorch's no-op: a strided self keeps its strides and version; so a trace
        # can go on: the shape is the trace's, as every shape is)
        return self
    tracer = trace_state.state.tracer
    if tracer is not None:
        tracer.untraceable("resize_ (a change of a tensor's shape and storage)")
    numel = int(np.prod(shape, dtype=np.int64))
    st = self._storage
    flat = _memory_order(st, self._dtype)
    if flat is None:
        raise RuntimeError("resize_: the tensor's storage is not a plain buffer of its dtype "
                           "(a reinterpreted view): clone() it first")
    offset = self._storage_offset()
    need = offset + numel
    cap = flat.size
    if need > cap and st.__class__ is MetaStorage:     # (a longer view of the zero mapping)
        st.base = flat = meta_buffer(need, st.base.dtype)
    elif need > cap:
        if not st.base.flags.owndata or st.base.base is not None:
            raise RuntimeError("Trying to resize storage that is not resizable")
        # (references: self._storage, st and getrefcount's argument; no other tensor's)
        if sys.getrefcount(st) > 3:
            raise RuntimeError("resize_: growing a storage other tensors share (views of it) "
                               "would move the memory under them, which llgrad cannot do: "
                               "clone() the tensor first")
        grown = np.zeros(need, dtype=st.base.dtype)
        grown[:cap] = flat
        st.base = flat = grown
    self._data = flat[offset:need].reshape(shape)
    if fmt in CHANNELS_LAST:        # the same elements, strided channels-last
        order = CHANNELS_LAST[fmt]
        self._data = self._data.reshape([shape[d] for d in order]).transpose(np.argsort(order))
    if same:
        return self     # (a restride only: PyTorch keeps the version)
    st.version += 1
    if self._base is not None:
        self._view_version = st.version
    return self


def resize_as_(self, the_template, memory_format=None):
    """As torch.Tensor.resize_as_: resize_ to the_template's shape."""
    return resize_(self, *the_template.shape, memory_format=memory_format)


for _n, _f in (("new", new), ("resize_", resize_), ("resize_as_", resize_as_)):
    setattr(Tensor, _n, _f)
export(resize_as_)                      # (torch.resize_as_(input, the_template))
