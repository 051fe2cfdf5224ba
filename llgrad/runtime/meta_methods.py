"""The Tensor methods that tell a meta tensor apart: device / is_meta / is_cpu, its repr
(`tensor(..., device='meta', size=(2, 3))`), PyTorch's errors for reading its values
(item, tolist, numpy, cpu) and its moves between devices (to), and the random fills,
which on a meta tensor draw nothing (the generator stays as it was). Each wraps the CPU
method with one check of the tensor's storage class."""
import functools

import numpy as np

from ..ir import OPS
from . import dispatch, dtypes, functions, grad_mode
from .device import CPU, as_device, is_device_like
from . import formatting
from .formatting import default_float
from .inplace import call_inplace
from .meta_dispatch import no_meta_kernel, nonzero_error
from .meta_factories import meta_stand_in
from .meta_tensor import (META, MetaStorage, item_error, meta_copy_of, no_data_error,
                          numpy_error, reduce)
from .tensor import Storage, Tensor
from .tensor_storage_api import TypedStorage


def _is_meta(t):
    return t._storage.__class__ is MetaStorage


def meta_repr(t):
    """PyTorch's text of a meta tensor: no values, its size, and dtype and grad as usual."""
    parts = ["device='meta'", f"size={tuple(t._data.shape)}"]
    if t._dtype.name != default_float():
        parts.append(f"dtype=llgrad.{t._dtype.name}")
    fn = t._grad_fn
    if fn is not None:
        parts.append(f"grad_fn=<{type(fn).__name__}>")
    elif t.requires_grad:
        parts.append("requires_grad=True")
    # PyTorch's suffixes: each on a new line, indented under the values, where it would
    # make the line longer than the print options' linewidth
    text, line = "tensor(...", 12
    for part in parts:
        if line + len(part) + 2 > formatting.LINEWIDTH:
            text, line = text + ",\n" + " " * 7 + part, 7 + len(part)
        else:
            text, line = text + ", " + part, line + len(part) + 2
    return text + ")"


def _guarded(method, meta_fn):
    @functools.wraps(method)
    def f(self, *args, **kw):
        if self._storage.__class__ is MetaStorage:
            return meta_fn(self, *args, **kw)
        return method(self, *args, **kw)
    return f


def _raise(error):
    def f(self, *args, **kw):
        raise error()
    return f


def _item(self):
    n = self._data.size
    if n != 1:
        raise RuntimeError(f"a Tensor with {n} elements cannot be converted to Scalar")
    raise item_error()


def _meta_type(self, dtype=None, *args, **kw):
    if dtype is None:
        return "llgrad.meta." + self._dtype._tensor_type
    empty = meta_stand_in(self).reshape(-1)[:0]       # (the dtype's parsing, on no data)
    return Tensor.to(self, Tensor.type(empty, dtype).dtype)


def _parse_to(args, kwargs):
    """(device named, or None; the tensor argument, or None) of a Tensor.to call."""
    dev = kwargs.get("device")
    other = None
    for a in args:
        if isinstance(a, Tensor):
            other = a
        elif is_device_like(a):
            dev = a
    if dev is None and other is not None:
        dev = META if _is_meta(other) else CPU
    return (None if dev is None else as_device(dev)), other


def _to(method):
    @functools.wraps(method)
    def to(self, *args, **kwargs):
        if not args and not kwargs or self._storage.__class__ is not MetaStorage and \
                all(isinstance(a, (dtypes.dtype, bool)) for a in args) and \
                "device" not in kwargs:
            return method(self, *args, **kwargs)         # (the CPU's common calls)
        dev, other = _parse_to(args, kwargs)
        if dev is None:
            return method(self, *args, **kwargs)
        rest = [a for a in args if a is not other and not is_device_like(a)]
        kw = {k: v for k, v in kwargs.items() if k != "device"}
        if other is not None and "dtype" not in kw:
            kw["dtype"] = other._dtype
        if dev.type != "meta":
            if _is_meta(self):
                method(meta_stand_in(self), *rest, device=dev, **kw)    # (its argument errors)
                raise no_data_error()
            return method(self, *args, **kwargs)     # (as given: the CPU's argument errors)
        if _is_meta(self):
            return method(self, *rest, **kw)
        # the dtype to(meta, float64) asks for, from a cast of no data (the argument errors too)
        probe = Tensor._from_array(np.empty(0, self._data.dtype))
        kw.pop("memory_format", None)
        r = meta_copy_of(self, method(probe, *rest, **kw)._dtype)
        if self.requires_grad and grad_mode.state.grad_enabled:
            dispatch.record(OPS["to_dtype"], (self,), {"dtype": r._dtype.name}, [r])
        return r
    return to


def _fill(method):
    @functools.wraps(method)
    def fill(self, *args, **kw):
        if self._storage.__class__ is not MetaStorage:
            return method(self, *args, **kw)
        return call_inplace(OPS["fill"], self, (self, 0), {})   # (checks, version, history)
    return fill


# what has no meta kernel in PyTorch (a result shaped by the values, or values read out):
# its error, for a meta tensor among the arguments
_NO_KERNEL = {"nonzero": nonzero_error, "argwhere": nonzero_error,
              "masked_select": nonzero_error, "unique": lambda: no_meta_kernel("_unique2"),
              "unique_consecutive": lambda: no_meta_kernel("unique_consecutive"),
              "bincount": lambda: no_meta_kernel("bincount"),
              "equal": lambda: no_meta_kernel("equal"), "allclose": item_error,
              "to_sparse": lambda: no_meta_kernel("_to_sparse"),
              "to_sparse_coo": lambda: no_meta_kernel("_to_sparse")}


def _refused(fn, error):
    @functools.wraps(fn)
    def f(*args, **kw):
        for a in args[:2]:
            if isinstance(a, Tensor) and a._storage.__class__ is MetaStorage:
                raise error()
        return fn(*args, **kw)
    return f


def _storage_repr(method):
    @functools.wraps(method)
    def f(self):
        if self.__class__ is MetaStorage:
            return f"...\n[llgrad.storage.UntypedStorage(device=meta) of size {self.nbytes()}]"
        return method(self)
    return f


def _no_storage_data(*args):
    raise NotImplementedError("Not available for 'meta' device type")


def _typed_read(method):
    @functools.wraps(method)
    def f(self, *args):
        if self._untyped.__class__ is MetaStorage:
            _no_storage_data()
        return method(self, *args)
    return f


def _wrap_storages():
    # a meta storage's bytes are the zero mapping's: reading them raises, as PyTorch's
    for name in ("tolist", "__getitem__", "__iter__"):
        setattr(MetaStorage, name, _no_storage_data)
    MetaStorage.cpu = _raise(no_data_error)
    for name in ("tolist", "__getitem__"):
        setattr(TypedStorage, name, _typed_read(getattr(TypedStorage, name)))


def _wrap_methods():
    T = Tensor
    for name, error in _NO_KERNEL.items():
        if hasattr(T, name):
            setattr(T, name, _refused(getattr(T, name), error))
        if name in vars(functions):
            functions.export(_refused(getattr(functions, name), error), name)
    T.data_ptr = _guarded(T.data_ptr, lambda self: 0)
    T.__reduce_ex__ = _guarded(T.__reduce_ex__, lambda self, proto: reduce(self))
    MetaStorage.device = META
    Storage.__repr__ = _storage_repr(Storage.__repr__)
    T.device = property(lambda self: META if self._storage.__class__ is MetaStorage else CPU,
                        doc="The tensor's device (llgrad.device('cpu'), or 'meta'), as "
                            "torch.Tensor.device.")
    T.is_meta = property(_is_meta, doc="As torch.Tensor.is_meta: whether the tensor is on "
                                       "the meta device (shape and dtype, no data).")
    T.is_cpu = property(lambda self: self._storage.__class__ is not MetaStorage,
                        doc="As torch.Tensor.is_cpu.")
    T.item = _guarded(T.item, _item)
    T.tolist = _guarded(T.tolist, _raise(no_data_error))
    T.numpy = _guarded(T.numpy, _raise(numpy_error))
    T.__array__ = _guarded(T.__array__, _raise(numpy_error))
    T.__repr__ = T.__str__ = _guarded(T.__repr__, meta_repr)
    T.__format__ = _guarded(T.__format__, lambda self, spec: meta_repr(self))
    T.cpu = _guarded(T.cpu, _raise(no_data_error))
    T.type = _guarded(T.type, _meta_type)
    T.to = _to(T.to)
    for name in ("uniform_", "normal_", "bernoulli_", "random_", "exponential_", "cauchy_",
                 "log_normal_", "geometric_"):
        setattr(T, name, _fill(getattr(T, name)))


_wrap_methods()
_wrap_storages()
