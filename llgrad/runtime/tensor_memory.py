"""Where a tensor's memory comes from and lives, by PyTorch's names: llgrad.asarray,
llgrad.frombuffer, llgrad.from_file, llgrad.empty_strided, Tensor.new_empty_strided and the
other Tensor.new_* factories, and __array_wrap__ (np.exp(t) is a tensor); Tensor.share_memory_ /
is_shared, pin_memory / is_pinned, output_nr, and the deprecated out-of-place resize /
resize_as.

share_memory_ moves the storage into a shared mapping (process_sharing.py), so a process
forked afterwards, or given the tensor through multiprocessing (Hogwild's pattern), writes
into the same memory, as torch's shared memory does. llgrad cannot move memory under other
tensors that view the storage (NumPy views hold their own pointers), so a storage other
tensors share is refused with an error naming the workaround. A shared storage cannot
grow (resize_), as in PyTorch. Pinned memory is an accelerator's: on the CPU-only build
pin_memory() raises torch's error and is_pinned() is False."""
import gc
import os
import sys
import warnings

import numpy as np

from . import dtypes, trace_state
from .autograd_function import Function
from .creation import copy_construct_warning, copy_of, from_numpy, full_op, tensor
from .creation_checks import fill_value_fits
from .device import check as check_device
from .dispatch import scalar_type_name
from .functions import export
from .functions_settings import warn_once
from .numpy_scalars import python_number
from .process_sharing import mapping_of, shared_mapping
from .shapes import check_nonnegative, unpack_shape
from .tensor import Storage, Tensor


# ---- output_nr, pinned and shared memory --------------------------------------------------------

def _output_nr(self):
    """Which output of its grad_fn this tensor is (0 for leaves), as torch.Tensor.output_nr."""
    return self._output_nr


def pin_memory(self, device=None):
    """As torch.Tensor.pin_memory on a build without an accelerator: raises torch's error
    (pinned memory is for copies to an accelerator, which llgrad has not)."""
    raise RuntimeError("Cannot access accelerator device when none is available.")


def is_pinned(self, device=None):
    """As torch.Tensor.is_pinned: False (no memory is pinned on the CPU)."""
    return False


def is_shared(self):
    """As torch.Tensor.is_shared: whether share_memory_ moved the storage to shared memory."""
    return mapping_of(self._storage.base) is not None


def share_memory_(self):
    """As torch.Tensor.share_memory_: move the storage into shared memory (a no-op when it is
    there already); returns self. Processes forked afterwards, or given the tensor through
    multiprocessing, see each other's writes."""
    st = self._storage
    if mapping_of(st.base) is not None:
        return self
    tracer = trace_state.state.tracer
    if tracer is not None:
        tracer.untraceable("share_memory_ (a move of a tensor's storage)")
    base = st.base
    if not base.flags.c_contiguous:
        raise RuntimeError("share_memory_: the tensor's memory is a strided NumPy array given "
                           "to from_numpy: clone() it first")
    mm = shared_mapping(base.nbytes)
    shared = np.ndarray(base.shape, base.dtype, buffer=mm)
    shared[...] = base
    # every tensor over this memory moves with it (PyTorch moves the storage under all its
    # views): found through the garbage collector unless self is the storage's only tensor
    # (references: self._storage, st, getrefcount's argument; st.base, base, the argument)
    alone = sys.getrefcount(st) <= 3 and sys.getrefcount(base) <= \
        3 + (self._data is base) + (self._data.base is base)
    storages = [st] if alone else [st] + [
        o for o in gc.get_referrers(base) if type(o) is Storage and o is not st]
    tensors = [self] if alone else [
        o for s in storages for o in gc.get_referrers(s)
        if isinstance(o, Tensor) and o._storage is s]
    start = base.__array_interface__["data"][0]
    for s in storages:
        s.base = shared
    for t in tensors:
        d = t._data
        offset = d.__array_interface__["data"][0] - start if d.size else 0
        t._data = np.ndarray(d.shape, d.dtype, buffer=mm, offset=offset, strides=d.strides)
    return self


# ---- creation with strides; out-of-place resize ------------------------------------------------

def _strided(shape, stride, dtype, requires_grad, what):
    shape, stride = tuple(int(s) for s in shape), tuple(int(s) for s in stride)
    if len(shape) != len(stride):
        raise RuntimeError(f"dimensionality of sizes ({len(shape)}) must match dimensionality "
                           f"of strides ({len(stride)})")
    if any(n < 0 for n in shape):
        raise RuntimeError(f"Trying to create tensor with negative dimension {min(shape)}: "
                           f"{list(shape)}")
    if any(s < 0 for s in stride):
        raise RuntimeError(f"{what}: negative strides are not supported, got {list(stride)}")
    dt = dtypes.get_default_dtype() if dtype is None else dtypes.to_dtype(dtype)
    size = 0 if 0 in shape else 1 + sum((n - 1) * s for n, s in zip(shape, stride))
    if trace_state.state.tracer is not None:    # traced: a filled buffer viewed with strides
        t = full_op((size,), 0, dt).as_strided(shape, stride)
    else:
        buf = np.zeros(size, dtype=dt.np)
        arr = np.lib.stride_tricks.as_strided(buf, shape, tuple(s * buf.itemsize
                                                                for s in stride))
        t = Tensor._from_array(arr, Storage(buf))
    return _require_grad(t) if requires_grad else t


def empty_strided(size, stride, *, dtype=None, layout=None, device=None, requires_grad=False,
                  pin_memory=False):
    """As torch.empty_strided: a tensor of shape size laid out with the given strides over a
    storage just big enough (zeros; PyTorch leaves it uninitialised)."""
    check_device(device)
    if pin_memory:
        raise RuntimeError("pin_memory=True requires a CUDA or other accelerator backend; no "
                           "pinned memory allocator is available on this system.")
    return _strided(size, stride, dtype, requires_grad, "empty_strided")


def new_empty_strided(self, size, stride, *, dtype=None, layout=None, device=None,
                      requires_grad=False, pin_memory=False):
    """As torch.Tensor.new_empty_strided: empty_strided with self's dtype unless given."""
    return empty_strided(size, stride, dtype=self._dtype if dtype is None else dtype,
                         layout=layout, device=device, requires_grad=requires_grad,
                         pin_memory=pin_memory)


def _new_dtype(self, dtype, device):
    """The dtype of a Tensor.new_* result (self's unless given; float is float64), after
    torch's device check (x.new_zeros(n, device=x.device) is the common spelling)."""
    check_device(device)
    return self._dtype if dtype is None else dtypes.to_dtype(dtype)


def _new(fill):
    def f(self, *size, dtype=None, device=None, requires_grad=False, layout=None,
          pin_memory=False):
        shape = check_nonnegative(unpack_shape(size), "new") if size else ()
        t = full_op(shape, fill, _new_dtype(self, dtype, device))
        return t.requires_grad_(requires_grad) if requires_grad else t
    return f


def _new_full(self, size, fill_value, dtype=None, device=None, requires_grad=False,
              layout=None, pin_memory=False):
    d = _new_dtype(self, dtype, device)
    return full_op(check_nonnegative(tuple(size), "new_full"),
                   fill_value_fits(python_number(fill_value), d), d).requires_grad_(requires_grad)




def _new_tensor(self, data, dtype=None, device=None, requires_grad=False, layout=None,
                pin_memory=False):
    d = _new_dtype(self, dtype, device)
    if isinstance(data, Tensor):
        copy_construct_warning("tensor.new_tensor(sourceTensor)")
        return copy_of(data, d, requires_grad)
    return tensor(data, dtype=d, requires_grad=requires_grad)


def _array_wrap(self, array, context=None, return_scalar=False):
    """A NumPy ufunc's result on a tensor (np.exp(t)) as a tensor sharing its memory, as
    torch.Tensor.__array_wrap__ makes it (a bool result as uint8: np.greater(t, 1))."""
    array = np.asarray(array)
    return from_numpy(array.astype(np.uint8) if array.dtype == np.bool_ else array)


class Resize(Function):
    """torch.autograd._functions.Resize: a reshape that keeps the element count (grad_fn
    ResizeBackward), behind the deprecated Tensor.resize / resize_as."""

    @staticmethod
    def forward(ctx, t, sizes):
        ctx.sizes = sizes
        ctx.numel = int(np.prod(sizes, dtype=np.int64))
        if t.numel() != ctx.numel:
            raise RuntimeError(
                f"requested resize to {'x'.join(map(str, sizes))} ({ctx.numel} elements in "
                f"total), but the given tensor has a size of {'x'.join(map(str, t.shape))} "
                f"({t.numel()} elements). autograd's resize can only change the shape of a "
                "given tensor, while preserving the number of elements. ")
        ctx.input_sizes = tuple(t.shape)
        if t.is_contiguous():
            return t.detach().view(*sizes)
        return t.contiguous().view(*sizes)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output.contiguous().view(ctx.input_sizes), None


def resize(self, *sizes):
    """As torch.Tensor.resize (deprecated): self reshaped to sizes, same element count."""
    warnings.warn("non-inplace resize is deprecated", stacklevel=2)
    return Resize.apply(self, tuple(unpack_shape(sizes)))


def resize_as(self, tensor):
    """As torch.Tensor.resize_as (deprecated): resize to tensor's shape."""
    warnings.warn("non-inplace resize_as is deprecated", stacklevel=2)
    return Resize.apply(self, tuple(tensor.shape))


Tensor.output_nr = property(_output_nr)
for _n, _f in (("pin_memory", pin_memory), ("is_pinned", is_pinned), ("is_shared", is_shared),
               ("share_memory_", share_memory_), ("new_empty_strided", new_empty_strided),
               ("resize", resize), ("resize_as", resize_as), ("new_zeros", _new(0)),
               ("new_ones", _new(1)), ("new_empty", _new(0)), ("new_full", _new_full),
               ("new_tensor", _new_tensor), ("__array_wrap__", _array_wrap)):
    _f.__name__ = _n
    _f.__doc__ = _f.__doc__ or f"As torch.Tensor.{_n}."
    setattr(Tensor, _n, _f)


# ---- frombuffer and asarray -------------------------------------------------------------------

def frombuffer(buffer, *, dtype, count=-1, offset=0, requires_grad=False):
    """As torch.frombuffer: a 1-D tensor over the memory of an object with the buffer
    protocol (bytearray, array.array, mmap, ...), shared with it."""
    try:
        view = memoryview(buffer)
    except TypeError:
        raise ValueError("object does not implement Python buffer protocol.") from None
    if not view.contiguous:
        raise RuntimeError("could not retrieve buffer from object")
    dt = dtypes.to_dtype(dtype)
    length, item = view.nbytes, dt.itemsize
    if length <= 0 or count == 0:
        raise ValueError(f"both buffer length ({length}) and count ({count}) must not be 0")
    if offset < 0 or offset >= length:
        raise ValueError(f"offset ({offset} bytes) must be non-negative and no greater than "
                         f"buffer length ({length} bytes) minus 1")
    if count < 0:
        if (length - offset) % item:
            raise ValueError(f"buffer length ({length - offset} bytes) after offset ({offset} "
                             f"bytes) must be a multiple of element size ({item})")
        count = (length - offset) // item
    elif offset + count * item > length:
        raise ValueError(f"requested buffer length ({count} * {item} bytes) after offset "
                         f"({offset} bytes) must not be greater than actual buffer length "
                         f"({length} bytes)")
    if view.readonly:
        warn_once("frombuffer-readonly", "The given buffer is not writable, and PyTorch does "
                  "not support non-writable tensors. This means you can write to the underlying "
                  "(supposedly non-writable) buffer using the tensor. You may want to copy the "
                  "buffer to protect its data or make it writable before converting it to a "
                  "tensor. This type of warning will be suppressed for the rest of this program.")
    arr = np.frombuffer(view.cast("B"), dtype=dt.np, count=count, offset=offset)
    t = Tensor._from_array(arr)
    return _require_grad(t) if requires_grad else t


def from_file(filename, shared=None, size=0, *, dtype=None, layout=None, device=None,
              pin_memory=False):
    """As torch.from_file: a 1-D tensor of size elements read from a file; shared=True maps
    the file (writes to the tensor reach it; the file is made or grown to the size needed),
    otherwise a private mapping, as PyTorch's: writes to the tensor stay in it, while pages it
    has not written show the file's changes."""
    check_device(device)
    dt = dtypes.get_default_dtype() if dtype is None else dtypes.to_dtype(dtype)
    nbytes = int(size) * dt.itemsize
    filename = os.fspath(filename)
    if shared:
        with open(filename, "ab") as f:             # (made if missing)
            if f.tell() < nbytes:
                f.truncate(nbytes)
    elif not os.path.exists(filename):
        raise RuntimeError(f"unable to open file <{filename}> in read-only mode: No such "
                           f"file or directory (2)")
    have = os.path.getsize(filename)
    if have < nbytes:
        raise RuntimeError(f"file <{filename}> size <{have}> is smaller than the required "
                           f"mapping size <{nbytes}>")
    if nbytes == 0:
        return Tensor._from_array(np.empty(0, dt.np))
    if shared:
        arr = np.memmap(filename, dtype=dt.np, mode="r+", shape=(int(size),))
    else:
        arr = np.memmap(filename, dtype=dt.np, mode="c", shape=(int(size),))
    return Tensor._from_array(arr)


def _is_capsule(obj):
    return type(obj).__name__ == "PyCapsule"


# a DLPack capsule's tensor: llgrad.utils.dlpack.from_dlpack, set there (it lies above
# the runtime)
from_capsule = None


def asarray(obj, *, dtype=None, device=None, copy=None, requires_grad=None):
    """As torch.asarray: obj as a tensor, sharing memory where it can. A tensor, NumPy array,
    DLPack capsule or buffer-protocol object is aliased unless copy=True or a different dtype
    needs a copy (copy=False then raises); sequences and scalars are copied (copy=False
    raises). requires_grad=None keeps a tensor's own flag (warning once, as torch 2.13, when
    that is True); True/False sets a leaf's flag in place and detaches a non-leaf."""
    check_device(device)
    dt = None if dtype is None else dtypes.to_dtype(dtype)
    force_copy, force_alias = copy is True, copy is False
    t, numpy_readonly = None, False
    if isinstance(obj, Tensor):
        t = obj
    elif isinstance(obj, np.ndarray):
        t, numpy_readonly = from_numpy(obj), not obj.flags.writeable
    elif isinstance(obj, np.generic):
        if force_alias:
            raise RuntimeError("can't alias NumPy scalars. Either remove copy=False or "
                               "transform it in a ndarray. ")
        t, force_copy = from_numpy(np.array(obj)), False
    elif _is_capsule(obj) and from_capsule is not None:
        t = from_capsule(obj)
    elif not isinstance(obj, (str, list, tuple, int, float, bool)) and _has_buffer(obj):
        t = frombuffer(obj, dtype=dtypes.get_default_dtype() if dt is None else dt)
    if t is None:
        if force_alias:
            raise ValueError("can't alias arbitrary sequence into a tensor.")
        if isinstance(obj, str):
            raise TypeError("new(): invalid data type 'str'")
        if not isinstance(obj, (list, tuple, int, float, bool)):
            raise RuntimeError(f"Could not infer dtype of {type(obj).__name__}")
        t = tensor(obj, dtype=dt)
        return _require_grad(t) if requires_grad else t
    wrong_dtype = dt is not None and dt is not t._dtype
    if force_copy or (copy is None and wrong_dtype):
        t = t.to(dt) if wrong_dtype else t.clone()
    elif wrong_dtype:
        raise ValueError(f"can't alias tensor with dtype '{scalar_type_name(t._dtype)}' into "
                         f"dtype '{scalar_type_name(dt)}'.")
    elif numpy_readonly:
        warn_once("numpy-readonly", "The given NumPy array is not writable, and PyTorch does "
                  "not support non-writable tensors. This means writing to this tensor will "
                  "result in undefined behavior. You may want to copy the array to protect its "
                  "data or make it writable before converting it to a tensor. This type of "
                  "warning will be suppressed for the rest of this program.")
    if requires_grad is None:
        if t.requires_grad:
            warn_once("asarray-requires-grad", "torch.asarray: unspecified requires_grad now "
                      "defaults to obj.requires_grad instead of False. Pass requires_grad=False "
                      "explicitly to get the old behavior and silence this warning.")
        return t
    if t.grad_fn is None:
        return _require_grad(t) if requires_grad else t.requires_grad_(False)
    return t if requires_grad else t.detach()


def _require_grad(t):
    """t.requires_grad_() with the message of PyTorch's factory functions."""
    if not t._dtype.is_floating_point:
        raise RuntimeError("Only Tensors of floating point and complex dtype can require "
                           "gradients")
    return t.requires_grad_(True)


def _has_buffer(obj):
    try:
        memoryview(obj)
    except TypeError:
        return False
    return True


for _f in (empty_strided, frombuffer, from_file, asarray):
    export(_f)
