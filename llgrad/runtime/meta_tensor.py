"""Tensors on PyTorch's meta device: shape, strides, dtype and autograd history, no data.

A meta tensor is an ordinary Tensor whose Storage is a MetaStorage. Its `_data` is a NumPy
view with the tensor's exact shape, strides and storage offset over one shared read-only
anonymous mapping of zero pages (1 TiB of address space, no memory: reading maps the
kernel's zero page, and no page is ever written). So every metadata read (size(), stride(),
storage_offset(), is_contiguous()) and every view op is the CPU tensor's code unchanged, a
read that slips past the meta checks sees zeros instead of crashing, and a write raises
NumPy's read-only error instead of committing memory. Ops reach meta tensors through the
dispatcher's hook (meta_dispatch.py); the values-reading methods raise PyTorch's errors."""
import mmap

import numpy as np

from ..ir.geometry import contiguous_strides
from . import dispatch, vmap_fallback
from .device import device
from .dtypes import from_name
from .memory_layout import preserved_strides
from .tensor import Storage, Tensor

META = device("meta")
hook = None     # the dispatcher's meta hook (meta_dispatch.py), put in with the first meta tensor
values_hook = None  # and the value-reading functions' (meta_values.py)
_REGION_BYTES = 1 << 40
_region = None


class MetaStorage(Storage):
    """The storage of a meta tensor: its `base` views the shared zero mapping, so it has a
    size (untyped_storage().nbytes()) and a version counter but no memory of its own."""
    __slots__ = ()


def _mapping(nbytes):
    mm = mmap.mmap(-1, max(nbytes, 1), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS,
                   prot=mmap.PROT_READ)
    return np.frombuffer(mm, np.uint8)


def _zeros_for(nbytes):
    """A read-only zero buffer of at least nbytes (the shared one; a larger storage gets a
    mapping of its own)."""
    global _region
    if nbytes > _REGION_BYTES or _region is False:
        return _mapping(nbytes)
    if _region is None:
        try:
            _region = _mapping(_REGION_BYTES)
        except (OSError, ValueError, OverflowError):  # (address space limited: one each)
            _region = False
            return _mapping(nbytes)
    return _region


def _install():
    dispatch.meta = hook
    vmap_fallback.meta = values_hook


def is_meta(t):
    """Whether tensor t lives on the meta device."""
    return t._storage.__class__ is MetaStorage


def is_meta_device(d):
    """Whether d (a device, a string, or None) names the meta device."""
    if d is None:
        return False
    if isinstance(d, str):
        return d == "meta" or d.startswith("meta:")
    return getattr(d, "type", None) == "meta"


def storage_elements(shape, strides, offset=0):
    """The elements a storage needs to hold a view of this geometry."""
    if 0 in shape:
        return offset
    return offset + 1 + sum((n - 1) * s for n, s in zip(shape, strides))


def meta_buffer(n, np_dtype):
    """A flat NumPy array of n elements of np_dtype over the zero mapping (a meta storage's
    base)."""
    return np.ndarray((n,), np_dtype, _zeros_for(n * np.dtype(np_dtype).itemsize))


def meta_storage(arr):
    """A meta storage of NumPy array arr's size and dtype, its values dropped (llgrad.load's
    map_location='meta')."""
    storage = Storage.__new__(MetaStorage)
    storage.base = np.ndarray(arr.shape, arr.dtype, _zeros_for(arr.nbytes))
    storage.version, storage.write_loc = 0, None
    if dispatch.meta is None:
        _install()
    return storage


def meta_tensor(shape, dtype, strides=None, requires_grad=False):
    """A new meta tensor (a leaf) of shape and dtype, row-major unless strides are given."""
    shape = tuple(int(n) for n in shape)
    strides = contiguous_strides(shape) if strides is None else tuple(strides)
    npd = np.dtype(dtype.np)
    n = storage_elements(shape, strides)
    buf = _zeros_for(n * npd.itemsize)
    storage = Storage.__new__(MetaStorage)
    storage.base, storage.version, storage.write_loc = np.ndarray((n,), npd, buf), 0, None
    data = np.ndarray(shape, npd, buf, 0, tuple(s * npd.itemsize for s in strides))
    t = Tensor._from_array(data, storage)
    if dispatch.meta is None:
        _install()
    if requires_grad:
        t.requires_grad_(True)
    return t


def meta_copy_of(t, dtype=None):
    """A meta tensor with t's shape and dtype (or dtype), laid out as a preserve_format copy
    of t (its strides when dense, else dense in its dimension order)."""
    from_layout = preserved_strides(tuple(t._data.shape), t.stride())
    return meta_tensor(t._data.shape, dtype or t._dtype, from_layout)


def rebuild(shape, dtype_name, strides, requires_grad):
    """A meta tensor from what pickle and copy.deepcopy keep of one (no data)."""
    return meta_tensor(shape, from_name(dtype_name), strides, requires_grad)


def rebuild_meta(dtype, size, stride, requires_grad):
    """torch._utils._rebuild_meta_tensor_no_storage: a meta tensor from a checkpoint."""
    if not hasattr(dtype, "np"):
        raise TypeError(f"_rebuild_meta_tensor_no_storage: not a dtype: {dtype!r}")
    return meta_tensor(tuple(size), dtype, tuple(stride), bool(requires_grad))


def reduce(t):
    """pickle's and copy.deepcopy's reduction of meta tensor t."""
    return rebuild, (tuple(t._data.shape), t._dtype.name, t.stride(), t.requires_grad)


def root_grad_to(t, g, i):
    """Gradient g given for backward's root i, t, on the other device: a CPU scalar moves to
    the meta device (as PyTorch moves it); else PyTorch's errors."""
    if not is_meta(t):
        raise no_data_error()       # (PyTorch copies g to the CPU)
    if not g._data.ndim:
        return meta_tensor((), g._dtype)
    raise RuntimeError(f"invalid gradient at index {i} - expected device meta but got cpu")


def no_data_error():
    """PyTorch's error for reading the values of a meta tensor into a CPU one."""
    return NotImplementedError("Cannot copy out of meta tensor; no data!")


def item_error():
    """PyTorch's error for a meta tensor's item() (and bool/float/int of one)."""
    return RuntimeError("Tensor.item() cannot be called on meta tensors")


def numpy_error():
    """PyTorch's error for numpy() of a meta tensor."""
    return TypeError("can't convert meta device type tensor to numpy. Use Tensor.cpu() to "
                     "copy the tensor to host memory first.")
