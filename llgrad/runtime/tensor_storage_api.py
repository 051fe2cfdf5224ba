"""PyTorch's storage-level Tensor API on the CPU: Tensor.storage() (a TypedStorage over the
tensor's Storage, with PyTorch's deprecation warning), storage_type(), the legacy typed
storage classes (FloatStorage, LongStorage, ...), set_ (rebind self to another tensor's or a
storage's memory), is_set_to, and the element-wise Python callbacks apply_ / map_ / map2_.
All of them work on memory directly, so inside llgrad.compile a call runs eagerly."""
import numpy as np

from . import dtypes, trace_state
from .functions import export
from .shapes import broadcast_shapes
from .symbolic_uses import check_layout
from .tensor import Storage, Tensor
from .user_frames import user_stacklevel

_C_NAMES = {"float64": "double", "float32": "float", "float16": "c10::Half",
            "int64": "long int", "int32": "int", "int16": "short int", "int8": "signed char",
            "uint8": "unsigned char", "bool": "bool", "bfloat16": "c10::BFloat16"}
_warned = []


def _untraceable(what):
    tracer = trace_state.state.tracer
    if tracer is not None:
        tracer.untraceable(what)


class TypedStorage:
    """As torch.TypedStorage: a Storage's memory read as one dtype (tensor.storage());
    indexing reads and writes the elements, shared with every tensor of the storage."""

    dtype = None

    def __init__(self, *args, dtype=None, _storage=None):
        if _storage is None:
            dt = dtype or self.dtype or dtypes.get_default_dtype()
            data = args[0] if args else 0
            arr = np.zeros(data, dt.np) if isinstance(data, int) else \
                dtypes.cast_array(np.array(data, np.float64), dt) if dt is dtypes.bfloat16 else \
                np.array(data, dt.np)
            _storage = Storage(arr.reshape(-1))
        self._untyped = _storage
        if dtype is not None:
            self.dtype = dtype

    def _array(self):
        base = self._untyped.base.reshape(-1)
        return base if base.dtype == self.dtype.np else base.view(self.dtype.np)

    def size(self):
        """The number of elements."""
        return self._array().size

    __len__ = size

    def __getitem__(self, i):
        return self._array()[i].item() if isinstance(i, int) else self._array()[i].tolist()

    def __setitem__(self, i, value):
        # (bfloat16's memory holds bfloat16 values only: a value is rounded to one first)
        self._array()[i] = dtypes.cast_array(np.asarray(value, np.float64), self.dtype) \
            if self.dtype is dtypes.bfloat16 else value
        self._untyped.version += 1

    def tolist(self):
        """The elements as a list of Python numbers."""
        return self._array().tolist()

    def nbytes(self):
        """The storage's size in bytes."""
        return self._array().nbytes

    def element_size(self):
        """The bytes of one element."""
        return self.dtype.itemsize

    def data_ptr(self):
        """The address of the first element."""
        return self._untyped.data_ptr()

    def untyped(self):
        """The Storage underneath."""
        return self._untyped

    def is_shared(self):
        """False: llgrad's storages live in this process's memory."""
        return False

    device = property(lambda self: "cpu", doc="Always the CPU.")

    def __repr__(self):
        body = "\n".join(f" {v}" for v in self.tolist())
        return (f"{body}\n[llgrad.storage.TypedStorage(dtype=llgrad.{self.dtype.name}, "
                f"device=cpu) of size {self.size()}]")


_LEGACY = {"float32": "FloatStorage", "float64": "DoubleStorage", "float16": "HalfStorage",
           "int64": "LongStorage", "int32": "IntStorage", "int16": "ShortStorage",
           "int8": "CharStorage", "uint8": "ByteStorage", "bool": "BoolStorage",
           "bfloat16": "BFloat16Storage"}
STORAGE_TYPES = {}
for _name, _cls in _LEGACY.items():
    STORAGE_TYPES[_name] = type(_cls, (TypedStorage,), {
        "dtype": getattr(dtypes, "bool_" if _name == "bool" else _name),
        "__module__": "llgrad", "__doc__": f"As torch.{_cls}: a TypedStorage of {_name}."})


def storage(self):
    """As torch.Tensor.storage: the tensor's whole storage as a TypedStorage of its dtype
    (with PyTorch's deprecation warning, once)."""
    if not _warned:
        _warned.append(True)
        trace_state.warn_first(
            "TypedStorage is deprecated. It will be removed in the future and UntypedStorage "
            "will be the only storage class. This should only matter to you if you are using "
            "storages directly.  To access UntypedStorage directly, use "
            "tensor.untyped_storage() instead of tensor.storage()", UserWarning,
            stacklevel=user_stacklevel())
    if trace_state.state.tracer is not None:    # (of a copy standing for x[i]'s view)
        check_layout(trace_state.state.tracer, self)
    return STORAGE_TYPES[self._dtype.name](_storage=self._storage)


def storage_type(self):
    """As torch.Tensor.storage_type: the legacy storage class of the tensor's dtype."""
    return STORAGE_TYPES[self._dtype.name]


def set_(self, source=None, storage_offset=0, size=None, stride=None):
    """As torch.Tensor.set_: self made to view source's memory (a tensor: its storage, offset,
    shape and strides; a storage: from storage_offset, with size and stride, all of it by
    default), or, with no source, an empty tensor."""
    _untraceable("set_ (a change of a tensor's memory)")
    if self._requires_grad and self._grad_fn is None:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place "
                           "operation.")
    if source is None:
        arr = np.zeros(0, self._dtype.np)      # (on self's device: a meta tensor stays one)
        self._storage, self._data = self._storage.__class__(arr), arr
        return self
    if isinstance(source, Tensor):
        if source._dtype is not self._dtype:
            raise RuntimeError(f"Could not set tensor of type {_C_NAMES[source._dtype.name]} to "
                               f"a tensor of type {_C_NAMES[self._dtype.name]}")
        self._storage, self._data = source._storage, source._data
        return self
    st = source._untyped if isinstance(source, TypedStorage) else source
    base = st.base.reshape(-1)
    flat = base if base.dtype == self._dtype.np else base.view(self._dtype.np)
    if size is None:
        size, stride = (flat.size - storage_offset,), (1,)
    size = tuple(size)
    if stride is None:
        stride, acc = [], 1
        for n in reversed(size):
            stride.insert(0, acc)
            acc *= max(n, 1)
    need = storage_offset + sum((n - 1) * s for n, s in zip(size, stride)) + 1 \
        if all(n > 0 for n in size) else 0
    if need > flat.size:
        item = self._dtype.itemsize
        raise RuntimeError(f"setStorage: sizes {list(size)}, strides {list(stride)}, storage "
                           f"offset {storage_offset}, and itemsize {item} requiring a storage "
                           f"size of {need * item} are out of bounds for storage of size "
                           f"{flat.size * item}")
    item = flat.itemsize
    self._data = np.lib.stride_tricks.as_strided(flat[storage_offset:], size,
                                                 tuple(s * item for s in stride))
    self._storage = st
    return self


def is_set_to(self, tensor):
    """As torch.Tensor.is_set_to: whether both view the same memory the same way."""
    a, b = self._data, tensor._data
    return self._storage is tensor._storage and a.shape == b.shape and \
        a.strides == b.strides and \
        a.__array_interface__["data"][0] == b.__array_interface__["data"][0]


def _callback(self, name, fn, *others):
    _untraceable(f"{name} (a Python callback per element)")
    if self.requires_grad:
        raise RuntimeError(f"Can't call {name}() on Variable that requires grad. Use "
                           f"var.detach().{name}() instead.")
    arrays = []
    for o in others:
        if o._dtype is not self._dtype:
            raise TypeError(f"{name}: expected llgrad.{self._dtype._tensor_type} for 'other' "
                            f"(got llgrad.{o._dtype._tensor_type})")
        shape = tuple(self._data.shape)
        try:
            if broadcast_shapes(tuple(o._data.shape), shape) != shape:
                raise ValueError
        except (ValueError, RuntimeError):
            raise RuntimeError(f"The expanded size of the tensor ({shape[-1]}) must match the "
                               f"existing size ({o._data.shape[-1]}) at non-singleton "
                               f"dimension {len(shape) - 1}.  Target sizes: {list(shape)}.  "
                               f"Tensor sizes: {list(o._data.shape)}") from None
        arrays.append(np.broadcast_to(o._data, shape))
    flat = [np.asarray(a).reshape(-1).tolist() for a in [self._data] + arrays]
    out = np.array([fn(*vals) for vals in zip(*flat)], dtype=np.float64 if
                   self._dtype.is_floating_point else object)
    self._data[...] = dtypes.cast_array(out, self._dtype).reshape(self._data.shape)
    self._storage.version += 1
    return self


def apply_(self, callable):  # noqa: A002 (PyTorch's parameter name)
    """As torch.Tensor.apply_: each element replaced by callable(element), in place (CPU
    only, slow; not for tensors that require grad)."""
    return _callback(self, "apply_", callable)


def map_(self, tensor, callable):  # noqa: A002
    """As torch.Tensor.map_: each element replaced by callable(element, tensor's element),
    tensor broadcast to self."""
    return _callback(self, "map_", callable, tensor)


def map2_(self, x, y, callable):  # noqa: A002
    """As torch.Tensor.map2_: each element replaced by callable(element, x's, y's)."""
    return _callback(self, "map2_", callable, x, y)


def is_storage(obj, /):
    """As torch.is_storage: whether obj is a storage (Tensor.untyped_storage()'s Storage or
    Tensor.storage()'s TypedStorage); replaces functions_settings' Storage-only answer."""
    return type(obj) is Storage or isinstance(obj, TypedStorage)


export(is_storage)
for _f in (storage, storage_type, set_, is_set_to, apply_, map_, map2_):
    setattr(Tensor, _f.__name__, _f)
for _cls in STORAGE_TYPES.values():
    export(_cls)
export(TypedStorage)
