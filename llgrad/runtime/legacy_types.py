"""PyTorch's legacy constructors: `llgrad.Tensor(data)` / `llgrad.Tensor(*sizes)` (a tensor of
the default dtype) and the typed tensor classes `llgrad.FloatTensor`, `LongTensor`, ... (as
torch.LongTensor: called, they make a tensor of their dtype; isinstance checks the dtype;
`t.type(llgrad.LongTensor)` casts)."""
import warnings

import numpy as np

from . import dtypes
from .creation import empty, tensor
from .device import check as check_device
from .tensor import Size, Tensor


def _is_size(args):
    return all(type(a) is int for a in args) or (
        len(args) == 1 and isinstance(args[0], Size))


def new(dtype, args, kwargs, typed):
    """A tensor of dtype from the legacy constructor's arguments (as torch's `new()`):
    nothing (empty), sizes (ints or one Size: uninitialised memory, here zeros), a tensor
    (an alias of it) or data (a sequence or array)."""
    device = kwargs.pop("device", None)
    if kwargs:
        raise TypeError(f"new() received an invalid combination of arguments - got keyword "
                        f"arguments {tuple(kwargs)}; expected (*sizes), (data) or (Tensor "
                        "other), each with an optional device")
    check_device(device)
    if not args:
        return empty(0, dtype=dtype)
    if _is_size(args):
        return empty(args[0] if isinstance(args[0], Size) else args, dtype=dtype)
    if len(args) == 1 and isinstance(args[0], Tensor):
        t = args[0]
        if typed and t._dtype is not dtype:
            raise TypeError(f"expected a tensor of dtype llgrad.{dtype.name} (got one of "
                            f"llgrad.{t._dtype.name})")
        return t._op("alias")
    if len(args) > 1:
        bad = next(a for a in args if type(a) is not int)
        raise TypeError(f"new(): argument 'size' must be a tuple of ints, but found element "
                        f"of type {type(bad).__name__}")
    data = args[0]
    if not isinstance(data, (list, tuple, range, np.ndarray)):     # (a range is one)
        raise TypeError(f"new(): data must be a sequence (got {type(data).__name__})")
    if _holds_tensor(data):             # (LongTensor([[topi[i][0] ...]]): tensor() takes
        return tensor(data, dtype=dtype)    # them, traced, where NumPy would read them out)
    arr = np.asarray(data)
    if arr.dtype.kind == "f" and dtype._cat == 1:
        arr = np.trunc(arr)             # (LongTensor([1.7, -1.7]) is [1, -1], as in torch)
    return tensor(arr, dtype=dtype)     # (BoolTensor([0.5]) is [True]: not truncated)


def _holds_tensor(data):
    return isinstance(data, Tensor) or isinstance(data, (list, tuple)) and any(
        _holds_tensor(x) for x in data)


def _tensor_new(cls, *args, **kwargs):
    t = new(dtypes.get_default_dtype(), args, dict(kwargs), typed=False)
    if cls is not Tensor:               # (a subclass without its own __new__)
        t = cls._from_array(t._data, t._storage)
    return t


Tensor.__new__ = _tensor_new


class _TensorType(type):
    """The class of the typed tensor classes (torch.tensortype)."""

    def __call__(cls, *args, **kwargs):
        return new(cls.dtype, args, dict(kwargs), typed=True)

    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor) and obj._dtype is cls.dtype

    def __repr__(cls):
        return f"<class 'llgrad.{cls.__name__}'>"


def _typed(d):
    return _TensorType(d._tensor_type, (), {
        "dtype": d, "__doc__": f"A tensor of llgrad.{d.name} (as torch.{d._tensor_type}): "
                              "called with data or sizes it makes one; isinstance checks "
                              "a tensor's dtype."})


FloatTensor, DoubleTensor, HalfTensor, LongTensor, IntTensor, ShortTensor, CharTensor, \
    ByteTensor, BoolTensor = (_typed(d) for d in (
        dtypes.float32, dtypes.float64, dtypes.float16, dtypes.int64, dtypes.int32,
        dtypes.int16, dtypes.int8, dtypes.uint8, dtypes.bool_))


_warned = []      # (the deprecation warning given: PyTorch's TORCH_WARN_ONCE)


def set_default_tensor_type(t):
    """The deprecated torch.set_default_tensor_type: a typed tensor class (FloatTensor,
    DoubleTensor, HalfTensor) or its name ('torch.DoubleTensor') sets the default dtype,
    with PyTorch's deprecation warning (once per process, as PyTorch gives it)."""
    if not _warned:
        _warned.append(True)
        warnings.warn("torch.set_default_tensor_type() is deprecated as of PyTorch 2.1, please "
                      "use torch.set_default_dtype() and torch.set_default_device() as "
                      "alternatives.", UserWarning, stacklevel=2)
    if isinstance(t, str):
        name = t.rsplit(".", 1)[-1]
        t = next((c for c in _ALL if c.__name__ == name), None)
        if t is None:
            raise TypeError(f"invalid type: '{name}'")
    if not isinstance(t, _TensorType):
        raise TypeError(f"invalid type: '{t}'")
    dtypes.set_default_dtype(t.dtype)


def get_device(input):
    """-1: the device index of a CPU tensor, as torch.get_device."""
    if not isinstance(input, Tensor):
        raise TypeError(f"get_device(): argument 'input' must be Tensor, not {type(input).__name__}")
    return -1


_ALL = (FloatTensor, DoubleTensor, HalfTensor, LongTensor, IntTensor, ShortTensor, CharTensor,
        ByteTensor, BoolTensor)
