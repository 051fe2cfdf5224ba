"""llgrad.save / llgrad.load in PyTorch's own checkpoint format, without PyTorch.

A file is what `torch.save` writes: a zip archive (records stored, not compressed, each
record's data aligned to 64 bytes) holding

    archive/data.pkl              the object, pickled with protocol 2
    archive/.format_version       "1"
    archive/.storage_alignment    "64"
    archive/byteorder             "little" (the machine's byte order)
    archive/data/<key>            the bytes of each storage, one record per storage
    archive/version               "3"
    archive/.data/serialization_id

In data.pkl a tensor is `torch._utils._rebuild_tensor_v2(storage, storage_offset, size,
stride, requires_grad, OrderedDict())`, its storage a persistent id `('storage',
torch.FloatStorage, key, 'cpu', numel)`; a Parameter is `torch._utils._rebuild_parameter(
tensor, requires_grad, OrderedDict())`. llgrad writes those names without importing torch
(so torch.load, `weights_only=True` included, reads llgrad's files) and maps them back to
llgrad tensors when loading (so files torch.save wrote load without torch installed).
Tensors that share a storage share one in the file and share memory again after loading;
strides and storage offsets are kept.

Loading is safe by default (`weights_only=True`, as in PyTorch 2.6 and later): a restricted
unpickler accepts only tensors, storages, Parameters, dtypes, devices, sizes, containers
(dict, list, tuple, set, OrderedDict, Counter) and plain values (numbers, strings, bytes,
None, bool), and refuses every other global with an error naming it, before anything is
called. `weights_only=False` runs the full pickle machinery: it can execute arbitrary code
and must only be used on files from a trusted source. `add_safe_globals` / `safe_globals`
allow more classes and functions, as in PyTorch."""
import _compat_pickle
import codecs
import contextlib
import hashlib
import io
import os
import pickle
import struct
import sys
import threading
import warnings
import zipfile
from collections import Counter, OrderedDict

import numpy as np

from .runtime import dtypes
from .runtime.device import as_device, device
from .runtime.tensor import Size, Storage, Tensor

__all__ = ["save", "load", "add_safe_globals", "safe_globals", "get_safe_globals",
           "clear_safe_globals", "DEFAULT_PROTOCOL"]

DEFAULT_PROTOCOL = 2
_ALIGN = 64

# llgrad dtype -> (torch's dtype name, torch's legacy storage class name)
_TORCH_NAMES = {
    dtypes.float32: ("float32", "FloatStorage"), dtypes.float64: ("float64", "DoubleStorage"),
    dtypes.float16: ("float16", "HalfStorage"), dtypes.int64: ("int64", "LongStorage"),
    dtypes.int32: ("int32", "IntStorage"), dtypes.int16: ("int16", "ShortStorage"),
    dtypes.int8: ("int8", "CharStorage"), dtypes.uint8: ("uint8", "ByteStorage"),
    dtypes.bool_: ("bool", "BoolStorage"),
}
# torch dtype names (and aliases) that have an llgrad dtype
_DTYPE_BY_TORCH_NAME = {"float32": dtypes.float32, "float": dtypes.float32,
                        "float64": dtypes.float64, "double": dtypes.float64,
                        "float16": dtypes.float16, "half": dtypes.float16,
                        "int64": dtypes.int64, "long": dtypes.int64, "int32": dtypes.int32,
                        "int": dtypes.int32, "int16": dtypes.int16, "short": dtypes.int16,
                        "int8": dtypes.int8, "uint8": dtypes.uint8, "bool": dtypes.bool_}
_OTHER_TORCH_DTYPES = ("bfloat16", "complex32", "complex64", "complex128", "cfloat", "cdouble",
                       "chalf", "uint16", "uint32", "uint64", "float8_e4m3fn", "float8_e5m2",
                       "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu", "qint8",
                       "quint8", "qint32", "quint4x2", "quint2x4", "bits8", "bits16",
                       "bits1x8", "bits2x4", "bits4x2", "int1", "int2", "int3", "int4", "int5",
                       "int6", "int7", "uint1", "uint2", "uint3", "uint4", "uint5", "uint6",
                       "uint7", "float4_e2m1fn_x2")


# ---- names in torch's namespace, written without torch ------------------------------------------

class _TorchName:
    """A global of torch's namespace as data.pkl names it (module, name): pickled as the
    GLOBAL opcode itself, so saving needs no torch."""
    __slots__ = ("module", "name")

    def __init__(self, module, name):
        self.module, self.name = module, name

    def __repr__(self):
        return f"{self.module}.{self.name}"


_REBUILD_TENSOR_V2 = _TorchName("torch._utils", "_rebuild_tensor_v2")
_REBUILD_PARAMETER = _TorchName("torch._utils", "_rebuild_parameter")
_REBUILD_PARAMETER_WITH_STATE = _TorchName("torch._utils", "_rebuild_parameter_with_state")
_REBUILD_FROM_TYPE_V2 = _TorchName("torch._tensor", "_rebuild_from_type_v2")
_TORCH_TENSOR = _TorchName("torch", "Tensor")
_TORCH_SIZE = _TorchName("torch", "Size")
_TORCH_DEVICE = _TorchName("torch", "device")
_TORCH_UNTYPED_STORAGE = _TorchName("torch", "UntypedStorage")
_STORAGE_TYPE = {d: _TorchName("torch", s) for d, (_, s) in _TORCH_NAMES.items()}
_DTYPE_NAME = {d: _TorchName("torch", n) for d, (n, _) in _TORCH_NAMES.items()}


# ---- saving --------------------------------------------------------------------------------------

class _StorageWriter:
    """The storages met while pickling: each llgrad Storage becomes one record (the whole
    memory region its buffer spans, as PyTorch saves whole storages), keyed "0", "1", ...
    in order of first use."""

    def __init__(self):
        self.records = []          # (key, flat array)
        self._by_id = {}           # id(Storage) -> (key, lo address, numel, dtype, storage)

    def _region(self, st):
        base = st.base
        if base.ndim and any(s < 0 for s in base.strides):
            base = base[tuple(slice(None, None, -1) if s < 0 else slice(None)
                              for s in base.strides)]
        item = base.itemsize
        lo = base.__array_interface__["data"][0]
        span = 0 if base.size == 0 else \
            sum((n - 1) * s for n, s in zip(base.shape, base.strides)) + item
        if span % item or any(s % item for s in base.strides):
            return None
        flat = np.lib.stride_tricks.as_strided(base, shape=(span // item,), strides=(item,),
                                               writeable=False)
        return lo, flat

    def storage_of(self, st, dt):
        """(pid source, element offset base address) for a tensor's Storage; dt is the
        tensor's dtype."""
        rec = self._by_id.get(id(st))
        if rec is None:
            region = self._region(st)
            if region is None:
                return None
            lo, flat = region
            if flat.dtype != dt.np:
                return None
            key = str(len(self.records))
            self.records.append((key, flat))
            rec = self._by_id[id(st)] = (key, lo, flat.size, _dtype_of(flat), st)
        elif rec[3] is not dt:
            raise RuntimeError("Cannot save multiple tensors or storages that view the same "
                               "data as different types")
        return rec

    def own(self, arr):
        """A record of its own for a contiguous copy of arr (a tensor whose memory cannot
        be described as a view of its storage)."""
        flat = np.ascontiguousarray(arr).reshape(-1)
        key = str(len(self.records))
        self.records.append((key, flat))
        holder = Storage(flat)
        rec = (key, flat.__array_interface__["data"][0], flat.size, _dtype_of(flat), holder)
        self._by_id[id(holder)] = rec
        return rec


def _dtype_of(arr):
    return dtypes.from_numpy_dtype(arr.dtype)


class _StoragePid:
    """What a tensor's pickled arguments hold in place of its storage: saved through the
    persistent-id protocol."""
    __slots__ = ("pid",)

    def __init__(self, pid):
        self.pid = pid


class _Pickler(pickle._Pickler):
    """The pure-Python pickler (it lets a type's saving be replaced): tensors become
    PyTorch's rebuild calls, dtypes / storage classes / torch.Size / torch.device PyTorch's
    globals; everything else pickles as pickle does."""
    dispatch = pickle._Pickler.dispatch.copy()

    def __init__(self, file, protocol, writer):
        super().__init__(file, protocol)
        self._writer = writer
        self._pids = {}            # storage key -> _StoragePid (one object per storage)

    def persistent_id(self, obj):
        if type(obj) is _StoragePid:
            return obj.pid
        if type(obj) is Storage:            # a bare storage: saved as an untyped storage
            rec = self._writer.storage_of(obj, _dtype_of(obj.base))
            if rec is None:
                rec = self._writer.own(obj.base)
            return ("storage", _STORAGE_TYPE[rec[3]], rec[0], "cpu", rec[2])
        return None

    def _pid(self, rec):
        key = rec[0]
        p = self._pids.get(key)
        if p is None:
            p = self._pids[key] = _StoragePid(("storage", _STORAGE_TYPE[rec[3]], key, "cpu",
                                               rec[2]))
        return p

    def _tensor_args(self, t):
        arr = t._data
        rec = None
        if all(s >= 0 for s in arr.strides):
            rec = self._writer.storage_of(t._storage, t._dtype)
        offset = None
        if rec is not None:
            item = arr.itemsize
            delta = arr.__array_interface__["data"][0] - rec[1]
            strides = t.stride()
            offset = delta // item
            extent = offset + sum((n - 1) * s for n, s in zip(arr.shape, strides)) + 1
            if arr.size == 0:
                offset = min(max(offset, 0), rec[2])
            elif delta % item or offset < 0 or extent > rec[2]:
                offset = None
        if offset is None:                        # not a view of its storage's region
            rec = self._writer.own(arr)
            offset, strides = 0, tuple(int(s) for s in _contiguous(arr.shape))
        return (self._pid(rec), int(offset), tuple(arr.shape), tuple(int(s) for s in strides))

    def reducer_override(self, obj):
        if isinstance(obj, Tensor):
            from .nn.module import Parameter
            storage, offset, size, stride = self._tensor_args(obj)
            state = _obj_state(obj)
            if isinstance(obj, Parameter):
                data = (_REBUILD_TENSOR_V2, (storage, offset, size, stride, False, OrderedDict()))
                data = _Reduced(*data)
                if state:
                    return (_REBUILD_PARAMETER_WITH_STATE,
                            (data, obj.requires_grad, OrderedDict(), state))
                return (_REBUILD_PARAMETER, (data, obj.requires_grad, OrderedDict()))
            args = (storage, offset, size, stride, obj.requires_grad, OrderedDict())
            if state:
                return (_REBUILD_FROM_TYPE_V2, (_REBUILD_TENSOR_V2, _TORCH_TENSOR, args, state))
            return (_REBUILD_TENSOR_V2, args)
        if type(obj) is _Reduced:
            return (obj.func, obj.args)
        if type(obj) is Size:
            return (_TORCH_SIZE, (tuple(obj),))
        if type(obj) is device:
            return (_TORCH_DEVICE, obj.__reduce__()[1])
        return NotImplemented

    def _write_global(self, module, name, obj):
        self.write(pickle.GLOBAL + module.encode("utf-8") + b"\n" + name.encode("utf-8")
                   + b"\n")
        self.memoize(obj)

    def _save_torch_name(self, obj):
        self._write_global(obj.module, obj.name, obj)

    def _save_dtype(self, obj):
        self._write_global("torch", _TORCH_NAMES[obj][0], obj)

    def _save_other_dtype(self, obj):
        self._write_global("torch", obj.name, obj)

    def _save_storage_type(self, obj):
        self._write_global("torch", obj.name, obj)

    dispatch[_TorchName] = _save_torch_name
    dispatch[dtypes.dtype] = _save_dtype


class _Reduced:
    """A nested rebuild call (the tensor inside a Parameter's rebuild)."""
    __slots__ = ("func", "args")

    def __init__(self, func, args):
        self.func, self.args = func, args


# _TorchName instances are "callable" for pickle's check on a reduce's function
_TorchName.__call__ = lambda self, *a, **k: None


def _obj_state(t):
    """Attributes a user set on a tensor (PyTorch saves them); llgrad's own are slots."""
    d = getattr(t, "__dict__", None)
    return dict(d) if d else None


def _contiguous(shape):
    strides, n = [], 1
    for d in reversed(shape):
        strides.append(n)
        n *= max(d, 1)
    return tuple(reversed(strides))


def _zip_record(zf, name, data):
    """Write one stored record whose data starts at a multiple of 64 bytes (as PyTorch's
    writer pads with an extra field "FB")."""
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_STORED
    info.external_attr = 0o600 << 16
    size = len(data)
    header = zf.fp.tell() + 30 + len(name.encode("utf-8"))
    if size * 1.05 > zipfile.ZIP64_LIMIT:
        header += 20                       # the zip64 extra field zipfile adds
    pad = (-(header + 4)) % _ALIGN
    info.extra = struct.pack("<HH", 0x4246, pad) + b"Z" * pad
    zf.writestr(info, data)


class _Sequential:
    """A file that tells but does not seek: zipfile then writes each record's sizes in a
    data descriptor after its data, as PyTorch's writer (miniz) does, so that the offsets
    PyTorch can compute from the layout (torch.utils.serialization.config.load.
    calculate_storage_offsets) are right."""

    def __init__(self, fp):
        self._fp, self._pos = fp, 0

    def write(self, b):
        n = self._fp.write(b)
        self._pos += len(b) if n is None else n
        return n

    def tell(self):
        return self._pos

    def seek(self, *args):
        raise OSError("not seekable")

    def flush(self):
        self._fp.flush()


def save(obj, f, pickle_module=pickle, pickle_protocol=DEFAULT_PROTOCOL,
         _use_new_zipfile_serialization=True, _disable_byteorder_record=False):
    """Save obj to f (a path or a writable binary file object) in PyTorch's zip checkpoint
    format: torch.load reads the file (with weights_only=True when obj holds only tensors,
    containers and plain values) and llgrad.load reads it back."""
    if not _use_new_zipfile_serialization:
        raise NotImplementedError("llgrad.save writes only the zip format "
                                  "(_use_new_zipfile_serialization=True)")
    if pickle_module is not pickle:
        raise NotImplementedError("llgrad.save pickles with the standard pickle module")
    writer = _StorageWriter()
    buf = io.BytesIO()
    _Pickler(buf, pickle_protocol, writer).dump(obj)
    data_pkl = buf.getvalue()

    def write_archive(fp):
        with zipfile.ZipFile(_Sequential(fp), "w", zipfile.ZIP_STORED) as zf:
            _zip_record(zf, "archive/data.pkl", data_pkl)
            _zip_record(zf, "archive/.format_version", b"1")
            _zip_record(zf, "archive/.storage_alignment", str(_ALIGN).encode())
            if not _disable_byteorder_record:
                _zip_record(zf, "archive/byteorder", sys.byteorder.encode())
            digest = hashlib.sha1(data_pkl)
            for key, flat in writer.records:
                raw = np.ascontiguousarray(flat).view(np.uint8).reshape(-1)
                digest.update(raw.data)
                _zip_record(zf, f"archive/data/{key}", raw.data)
            _zip_record(zf, "archive/version", b"3\n")
            sid = "%040d" % (int(digest.hexdigest(), 16) % 10 ** 40)
            _zip_record(zf, "archive/.data/serialization_id", sid.encode())

    if isinstance(f, (str, os.PathLike)):
        with open(f, "wb") as fp:
            write_archive(fp)
    else:
        out = io.BytesIO()
        write_archive(out)
        f.write(out.getvalue())
        if hasattr(f, "flush"):
            f.flush()


# ---- loading: the objects PyTorch's names stand for ----------------------------------------------

class _StorageType:
    """What torch.FloatStorage (etc.) loads as: the dtype of the storages it names."""
    __slots__ = ("name", "np")

    def __init__(self, name, npdt):
        self.name, self.np = name, npdt

    def __repr__(self):
        return f"torch.{self.name}"


_STORAGE_TYPES = {s: _StorageType(s, d.np) for d, (_, s) in _TORCH_NAMES.items()}
_STORAGE_TYPES["BFloat16Storage"] = _StorageType("BFloat16Storage", np.dtype("V2"))
_STORAGE_TYPES["UntypedStorage"] = _StorageType("UntypedStorage", np.dtype(np.uint8))
_STORAGE_TYPES["TypedStorage"] = _STORAGE_TYPES["UntypedStorage"]


class _OtherDtype:
    """A PyTorch dtype llgrad has no counterpart for (it loads as this, for the record; a
    tensor of it cannot be made)."""
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"torch.{self.name}"


# a loaded checkpoint saved again (weights_only=False can hold these) names them as PyTorch
_Pickler.dispatch[_OtherDtype] = _Pickler._save_other_dtype
_Pickler.dispatch[_StorageType] = _Pickler._save_storage_type


class _Loader:
    """One load: the archive, its storages (loaded once each, shared by their tensors) and
    the location mapping."""

    def __init__(self, zf, prefix, map_location):
        self.zf, self.prefix, self.map_location = zf, prefix, map_location
        self.storages = {}
        self.storage_ids = set()
        self.widened = False
        names = set(zf.namelist())
        order = prefix + "byteorder"
        self.byteorder = zf.read(order).decode() if order in names else "little"
        if self.byteorder not in ("little", "big"):
            raise ValueError("Unknown endianness type: " + self.byteorder)

    def persistent_load(self, saved_id):
        if not isinstance(saved_id, tuple) or not saved_id:
            raise pickle.UnpicklingError(f"persistent_load id must be a tuple, but got "
                                         f"{type(saved_id).__name__}")
        typename = saved_id[0]
        if isinstance(typename, bytes):
            typename = typename.decode("ascii")
        if typename != "storage" or len(saved_id) != 5:
            raise pickle.UnpicklingError("Only persistent_load of storage is allowed, but got "
                                         f"{typename!r}")
        storage_type, key, location, numel = saved_id[1:]
        if isinstance(key, bytes):
            key = key.decode("ascii")
        if isinstance(location, bytes):
            location = location.decode("ascii")
        if not isinstance(storage_type, _StorageType) or not isinstance(key, str) or \
                not isinstance(location, str) or type(numel) is not int or numel < 0:
            raise pickle.UnpicklingError(f"invalid storage id {saved_id!r}")
        st = self.storages.get(key)
        if st is None:
            st = self.storages[key] = self._load_storage(storage_type, key, location, numel)
            self.storage_ids.add(id(st))
        return st

    def _load_storage(self, storage_type, key, location, numel):
        npdt = storage_type.np
        name = f"{self.prefix}data/{key}"
        try:
            info = self.zf.getinfo(name)
        except KeyError:
            raise RuntimeError(f"llgrad.load: the archive has no record {name!r} for storage "
                               f"{key}") from None
        nbytes = numel * npdt.itemsize
        if info.file_size != nbytes:
            raise RuntimeError(f"llgrad.load: record {name!r} holds {info.file_size} bytes, "
                               f"but its storage ({numel} x {storage_type.name}) needs {nbytes}")
        raw = bytearray(nbytes)
        with self.zf.open(info) as fh:
            view = memoryview(raw)
            got = 0
            while got < nbytes:
                n = fh.readinto(view[got:])
                if not n:
                    raise RuntimeError(f"llgrad.load: record {name!r} is truncated")
                got += n
        if npdt.kind == "V":                       # bfloat16: widened to float32 exactly
            bits = np.frombuffer(raw, dtype=np.uint16)
            if self.byteorder != sys.byteorder:
                bits = bits.byteswap()
            self.widened = True
            arr = (bits.astype(np.uint32) << 16).view(np.float32)
        else:
            arr = np.frombuffer(raw, dtype=npdt)
            if self.byteorder != sys.byteorder and npdt.itemsize > 1:
                arr.byteswap(inplace=True)
        st = Storage(arr)
        return self._restore_location(st, location)

    def _restore_location(self, st, location):
        ml = self.map_location
        by_user = False                    # the location is the user's mapping, not the file's
        if callable(ml) and not isinstance(ml, (str, device)):
            result = ml(st, location)
            if result is not None:
                if not isinstance(result, Storage):
                    raise TypeError("map_location should return a storage (the one it was "
                                    f"given) or None, got {type(result).__name__}")
                return result
            ml = None
        if isinstance(ml, dict):
            by_user = location in ml
            location = ml.get(location, location)
            ml = None
        if ml is not None:
            location, by_user = str(as_device(ml)), True
        dev = as_device(location)
        if dev.type != "cpu":
            if not by_user:
                raise RuntimeError(
                    f"Attempting to deserialize object on a {dev.type.upper()} device but "
                    "llgrad runs on the CPU only. Please use llgrad.load with "
                    "map_location='cpu' (or map_location=torch.device('cpu')) to map your "
                    "storages to the CPU.")
            raise RuntimeError(f"llgrad runs on the CPU only; map_location maps storages to "
                               f"'{dev}'")
        return st

    # -- the rebuild functions (torch._utils) ------------------------------------------------------
    def rebuild_tensor(self, storage, storage_offset, size, stride, dtype=None):
        if not isinstance(storage, Storage) or id(storage) not in self.storage_ids:
            raise pickle.UnpicklingError("a tensor's storage must come from the archive")
        base = storage.base
        if dtype is not None:
            if not isinstance(dtype, dtypes.dtype):
                raise pickle.UnpicklingError(f"llgrad has no dtype {dtype!r}")
            if base.dtype != dtype.np:
                if base.nbytes % dtype.itemsize:
                    raise RuntimeError("llgrad.load: a storage's size is not a multiple of "
                                       f"the item size of {dtype!r}")
                base = base.view(dtype.np)
        size, stride = _int_tuple(size, "size"), _int_tuple(stride, "stride")
        if len(size) != len(stride):
            raise RuntimeError(f"mismatch in length of strides and shape: size {list(size)}, "
                               f"stride {list(stride)}")
        if type(storage_offset) is not int or storage_offset < 0 or \
                any(s < 0 for s in size) or any(s < 0 for s in stride):
            raise RuntimeError("llgrad.load: negative sizes, strides or storage offset")
        numel = 1
        for s in size:
            numel *= s
        if numel:
            needed = storage_offset + sum((n - 1) * s for n, s in zip(size, stride)) + 1
            if needed > base.size:
                raise RuntimeError(
                    f"setStorage: sizes {list(size)}, strides {list(stride)}, storage offset "
                    f"{storage_offset}, and itemsize {base.itemsize} requiring a storage size "
                    f"of {needed * base.itemsize} are out of bounds for storage of size "
                    f"{base.nbytes}")
        start = min(storage_offset, base.size)
        item = base.itemsize
        arr = np.lib.stride_tricks.as_strided(base[start:], shape=size,
                                              strides=tuple(s * item for s in stride))
        return Tensor._from_array(arr, storage)


def _int_tuple(x, what):
    if not isinstance(x, (tuple, list)) or any(type(v) is not int for v in x):
        raise pickle.UnpicklingError(f"a tensor's {what} must be a tuple of ints, got {x!r}")
    return tuple(x)


def _set_requires_grad(t, requires_grad):
    if requires_grad:
        if not t.is_floating_point():
            raise RuntimeError("only Tensors of floating point and complex dtype can require "
                               "gradients")
        t.requires_grad_(True)
    return t


def _set_state(obj, state):
    """PyTorch's _set_obj_state: attributes saved with a tensor (not llgrad's own slots)."""
    if isinstance(state, tuple):
        if len(state) != 2:
            raise RuntimeError(f"Invalid serialized state: {state}")
        state = state[0]
    if state:
        if not isinstance(state, dict):
            raise pickle.UnpicklingError("a tensor's saved state must be a dict")
        for k, v in state.items():
            if not isinstance(k, str) or k in Tensor.__slots__ or k.startswith("__"):
                raise pickle.UnpicklingError(f"cannot restore attribute {k!r} on a tensor")
            obj.__dict__[k] = v
    return obj


def _torch_globals(loader):
    """PyTorch's names as llgrad objects, for this load (the rebuild functions read its
    storages)."""
    from .nn.module import Parameter

    def _rebuild_tensor(storage, storage_offset, size, stride):
        return loader.rebuild_tensor(storage, storage_offset, size, stride)

    def _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad,
                           backward_hooks, metadata=None):
        t = loader.rebuild_tensor(storage, storage_offset, size, stride)
        return _set_requires_grad(t, requires_grad)

    def _rebuild_tensor_v3(storage, storage_offset, size, stride, requires_grad,
                           backward_hooks, dtype, metadata=None):
        t = loader.rebuild_tensor(storage, storage_offset, size, stride, dtype)
        return _set_requires_grad(t, requires_grad)

    def _rebuild_parameter(data, requires_grad, backward_hooks):
        if not isinstance(data, Tensor):
            raise pickle.UnpicklingError("a Parameter's data must be a tensor")
        return Parameter(data, requires_grad)

    def _rebuild_parameter_with_state(data, requires_grad, backward_hooks, state):
        return _set_state(_rebuild_parameter(data, requires_grad, backward_hooks), state)

    rebuilders = (_rebuild_tensor, _rebuild_tensor_v2, _rebuild_tensor_v3, _rebuild_parameter,
                  _rebuild_parameter_with_state)

    def _rebuild_from_type_v2(func, new_type, args, state):
        if func not in rebuilders:
            raise pickle.UnpicklingError(f"_rebuild_from_type_v2: unsupported function {func}")
        if new_type not in (Tensor, Parameter):
            raise pickle.UnpicklingError("_rebuild_from_type_v2: llgrad rebuilds only tensors "
                                         "and Parameters")
        ret = func(*args)
        if new_type is Parameter and not isinstance(ret, Parameter):
            ret = Parameter(ret, ret.requires_grad)
        return _set_state(ret, state)

    def parameter(data=None, requires_grad=True):
        return Parameter(data, requires_grad)

    def size(*args):
        return Size(*args)

    def get_layout(name):
        return name

    def encode(obj, encoding="utf-8", errors="strict"):      # protocol 2's bytes
        if not isinstance(obj, str):
            raise pickle.UnpicklingError("_codecs.encode: expected a str")
        return codecs.encode(obj, encoding, errors)

    g = {
        "collections.OrderedDict": OrderedDict, "collections.Counter": Counter,
        "builtins.set": set, "builtins.frozenset": frozenset, "builtins.bytearray": bytearray,
        "builtins.complex": complex, "_codecs.encode": encode,
        "torch._utils._rebuild_tensor": _rebuild_tensor,
        "torch._utils._rebuild_tensor_v2": _rebuild_tensor_v2,
        "torch._utils._rebuild_tensor_v3": _rebuild_tensor_v3,
        "torch._utils._rebuild_parameter": _rebuild_parameter,
        "torch._utils._rebuild_parameter_with_state": _rebuild_parameter_with_state,
        "torch._tensor._rebuild_from_type_v2": _rebuild_from_type_v2,
        "torch.nn.parameter.Parameter": parameter, "torch.Tensor": Tensor,
        "torch.Size": size, "torch.device": device,
        "torch.serialization._get_layout": get_layout,
    }
    for name, st in _STORAGE_TYPES.items():
        g[f"torch.{name}"] = st
        g[f"torch.cuda.{name}"] = st
        g[f"torch.storage.{name}"] = st
    for name, d in _DTYPE_BY_TORCH_NAME.items():
        g[f"torch.{name}"] = d
    for name in _OTHER_TORCH_DTYPES:
        g[f"torch.{name}"] = _OtherDtype(name)
    # the ones llgrad cannot rebuild: refused with the reason
    for name, what in (("_rebuild_qtensor", "quantized tensors"),
                       ("_rebuild_sparse_tensor", "sparse tensors"),
                       ("_rebuild_nested_tensor", "nested tensors"),
                       ("_rebuild_meta_tensor_no_storage", "meta tensors"),
                       ("_rebuild_wrapper_subclass", "tensor subclasses"),
                       ("_rebuild_device_tensor_from_numpy", "device tensors from NumPy"),
                       ("_rebuild_device_tensor_from_cpu_tensor", "device tensors")):
        g[f"torch._utils.{name}"] = _unsupported(name, what)
    return g


def _unsupported(name, what):
    def f(*args, **kwargs):
        raise RuntimeError(f"llgrad.load: the file holds {what} (torch._utils.{name}), which "
                           "llgrad does not support")
    f.__name__ = name
    return f


# ---- the safe-globals allowlist (PyTorch's add_safe_globals) -------------------------------------

_user_globals = {}
_user_lock = threading.Lock()


def _global_name(obj):
    return f"{obj.__module__}.{obj.__qualname__}"


def add_safe_globals(safe_globals):
    """Allow these classes and functions (or (obj, "module.name") pairs) in
    weights_only loads. Only allow what you trust: an allowed class can be built and an
    allowed function called with arguments from the file."""
    with _user_lock:
        for item in safe_globals:
            if isinstance(item, tuple):
                obj, name = item
            else:
                obj, name = item, _global_name(item)
            _user_globals[name] = obj


def get_safe_globals():
    """The user's allowed globals (as add_safe_globals was given them)."""
    with _user_lock:
        return [obj if _global_name(obj) == name else (obj, name)
                for name, obj in _user_globals.items()]


def clear_safe_globals():
    """Forget every global allowed with add_safe_globals."""
    with _user_lock:
        _user_globals.clear()


@contextlib.contextmanager
def safe_globals(safe_globals):
    """A context manager that allows these globals for weights_only loads inside it."""
    with _user_lock:
        saved = dict(_user_globals)
    add_safe_globals(safe_globals)
    try:
        yield
    finally:
        with _user_lock:
            _user_globals.clear()
            _user_globals.update(saved)


_UNSAFE_MESSAGE = (
    "Re-running `llgrad.load` with `weights_only` set to `False` will likely succeed, but it "
    "can result in arbitrary code execution. Do it only if you got the file from a trusted "
    "source.")
_DOCS = ("\n\nCheck the documentation of llgrad.load (help(llgrad.load)) to learn more about "
         "types accepted by default with weights_only.")


class _WeightsOnlyError(pickle.UnpicklingError):
    pass


def _fix_name(module, name, proto):
    if proto < 3:         # Python 2 names (as pickle's fix_imports)
        if (module, name) in _compat_pickle.NAME_MAPPING:
            module, name = _compat_pickle.NAME_MAPPING[(module, name)]
        elif module in _compat_pickle.IMPORT_MAPPING:
            module = _compat_pickle.IMPORT_MAPPING[module]
    return module, name


class _SafeUnpickler(pickle._Unpickler):
    """A restricted unpickler (the pure-Python one, whose opcodes can be overridden):
    globals only from the allowlist; reduce / newobj / build only on allowed objects;
    persistent ids only storages of the archive."""
    dispatch = pickle._Unpickler.dispatch.copy()

    def __init__(self, file, loader, allowed, **kwargs):
        super().__init__(file, **kwargs)
        self._loader = loader
        self._allowed = allowed
        with _user_lock:
            self._user = dict(_user_globals)
        self._callables = {id(v) for k, v in allowed.items() if k != "torch.Tensor"} | \
            {id(v) for v in self._user.values()}

    def persistent_load(self, pid):
        return self._loader.persistent_load(pid)

    def find_class(self, module, name):
        module, name = _fix_name(module, name, self.proto)
        full = f"{module}.{name}"
        if full in self._allowed:
            return self._allowed[full]
        if full in self._user:
            return self._user[full]
        shown = full
        if shown.startswith("builtins."):
            shown = shown[len("builtins."):]
        raise _WeightsOnlyError(
            f"Unsupported global: GLOBAL {shown} was not an allowed global by default. Please "
            f"use `llgrad.serialization.add_safe_globals([{name}])` or the "
            f"`llgrad.serialization.safe_globals([{name}])` context manager to allowlist this "
            "global if you trust this class/function.")

    def _check_callable(self, func, what):
        if id(func) not in self._callables or isinstance(func, (_StorageType, _OtherDtype)) \
                or isinstance(func, dtypes.dtype):
            raise _WeightsOnlyError(f"Trying to call {what} for unrecognized function {func!r}")

    def _load_reduce(self):
        stack = self.stack
        args = stack.pop()
        func = stack[-1]
        self._check_callable(func, "reduce")
        if not isinstance(args, tuple):
            raise _WeightsOnlyError("reduce arguments must be a tuple")
        stack[-1] = func(*args)

    def _load_newobj(self):
        args = self.stack.pop()
        cls = self.stack.pop()
        self._check_callable(cls, "new object")
        if not isinstance(args, tuple):
            raise _WeightsOnlyError("NEWOBJ arguments must be a tuple")
        if cls is self._allowed["torch.nn.parameter.Parameter"]:
            self.append(cls(*args))
        elif isinstance(cls, type):
            self.append(cls.__new__(cls, *args))
        else:
            raise _WeightsOnlyError(f"Can only create new object for classes, got {cls!r}")

    def _load_newobj_ex(self):
        kwargs = self.stack.pop()
        args = self.stack.pop()
        cls = self.stack.pop()
        self._check_callable(cls, "new object")
        if not isinstance(cls, type) or not isinstance(args, tuple) or \
                not isinstance(kwargs, dict):
            raise _WeightsOnlyError(f"Can only create new object for classes, got {cls!r}")
        self.append(cls.__new__(cls, *args, **kwargs))

    def _load_build(self):
        state = self.stack.pop()
        inst = self.stack[-1]
        t = type(inst)
        if isinstance(inst, Tensor):
            _set_state(inst, state)
        elif t is OrderedDict or t is Counter:
            if state:
                if not isinstance(state, dict):
                    raise _WeightsOnlyError("BUILD of an OrderedDict takes a dict")
                inst.__dict__.update(state)
        elif id(t) in {id(v) for v in self._user.values()}:
            setstate = getattr(inst, "__setstate__", None)
            if setstate is not None:
                setstate(state)
                return
            slotstate = None
            if isinstance(state, tuple) and len(state) == 2:
                state, slotstate = state
            if state:
                inst.__dict__.update(state)
            if slotstate:
                for k, v in slotstate.items():
                    setattr(inst, k, v)
        else:
            raise _WeightsOnlyError("Can only build Tensor, Parameter, OrderedDict or types "
                                    f"allowlisted via `add_safe_globals`, but got {t}")

    def _load_inst(self):
        raise _WeightsOnlyError("the INST and OBJ opcodes (pickle protocols 0 and 1 class "
                                "instances) are not allowed with weights_only")

    def _load_ext(self):
        raise _WeightsOnlyError("pickle extension codes are not allowed with weights_only")

    dispatch[pickle.REDUCE[0]] = _load_reduce
    dispatch[pickle.NEWOBJ[0]] = _load_newobj
    dispatch[pickle.NEWOBJ_EX[0]] = _load_newobj_ex
    dispatch[pickle.BUILD[0]] = _load_build
    dispatch[pickle.INST[0]] = _load_inst
    dispatch[pickle.OBJ[0]] = _load_inst
    for _op in (pickle.EXT1, pickle.EXT2, pickle.EXT4):
        dispatch[_op[0]] = _load_ext
    del _op


class _FullUnpickler(pickle.Unpickler):
    """weights_only=False: every global (PyTorch's names still map to llgrad's)."""

    def __init__(self, file, loader, allowed, **kwargs):
        super().__init__(file, **kwargs)
        self._loader, self._allowed = loader, allowed

    def persistent_load(self, pid):
        return self._loader.persistent_load(pid)

    def find_class(self, module, name):
        full = f"{module}.{name}"
        if full in self._allowed:
            return self._allowed[full]
        return super().find_class(module, name)


def _weights_only_message(message):
    if "Unsupported global" in message:
        return ("Weights only load failed. This file can still be loaded, to do so you have "
                "two options, do those steps only if you trust the source of the checkpoint. "
                f"\n\t(1) {_UNSAFE_MESSAGE}\n\t(2) Alternatively, to load with "
                "`weights_only=True` please check the recommended steps in the following error "
                f"message.\n\tWeightsUnpickler error: {message}{_DOCS}")
    return f"Weights only load failed. {_UNSAFE_MESSAGE}\n\n{message}{_DOCS}"


def _open_archive(f):
    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as fp:
            return _read_all(fp)
    if not hasattr(f, "read"):
        raise TypeError(f"llgrad.load: expected a path or a binary file object, got "
                        f"{type(f).__name__}")
    seekable = getattr(f, "seekable", lambda: False)()
    if seekable:
        return f
    return _read_all(f)


def _read_all(fp):
    data = fp.read()
    if isinstance(data, str):
        raise TypeError("llgrad.load: the file must be opened in binary mode ('rb')")
    return io.BytesIO(data)


def load(f, map_location=None, pickle_module=None, *, weights_only=None, mmap=None,
         **pickle_load_args):
    """Load an object saved by llgrad.save or torch.save (PyTorch's zip format), tensors as
    llgrad tensors (Parameters as llgrad.nn.Parameter).

    f: a path or a readable binary file object. weights_only (default True): only tensors,
    containers and plain values (and what add_safe_globals allows); anything else is refused
    with an error naming it. weights_only=False unpickles anything: it can run arbitrary code,
    so use it only on files you trust. map_location: 'cpu', llgrad.device('cpu') or
    torch.device('cpu'), a dict {'cuda:0': 'cpu'}, or a function (storage, location) ->
    storage; storages saved on another device need it (llgrad runs on the CPU only)."""
    if weights_only is None:
        weights_only = pickle_module is None
    if weights_only and pickle_module is not None:
        raise RuntimeError("Can not safely load weights when explicit pickle_module is "
                           "specified")
    if pickle_module is not None and pickle_module is not pickle:
        raise NotImplementedError("llgrad.load unpickles with the standard pickle module")
    if mmap:
        raise NotImplementedError("llgrad.load: mmap=True is not supported (storages are read "
                                  "into memory)")
    if map_location is not None and not callable(map_location) and \
            not isinstance(map_location, (str, dict, device)) and \
            not hasattr(map_location, "type"):
        raise ValueError("map_location should be either a string, a device, a dict or a "
                         f"callable, got {type(map_location).__name__}")
    if isinstance(map_location, (str, device)) or (not isinstance(map_location, dict) and
                                                   hasattr(map_location, "type")):
        as_device(map_location)                       # (a malformed string raises here)
    fp = _open_archive(f)
    start = fp.tell() if hasattr(fp, "tell") else 0
    if not zipfile.is_zipfile(fp):
        fp.seek(start)
        head = fp.read(64)
        if head[:1] == b"\x80":
            raise RuntimeError("llgrad.load reads PyTorch's zip checkpoint format (what "
                               "torch.save writes since PyTorch 1.6); this file is in the "
                               "legacy format: load it with torch.load and save it again with "
                               "torch.save")
        raise RuntimeError("llgrad.load: the file is not a PyTorch checkpoint (not a zip "
                           "archive)")
    fp.seek(start)
    with zipfile.ZipFile(fp) as zf:
        names = zf.namelist()
        pkl = [n for n in names if n.endswith("/data.pkl") and n.count("/") == 1]
        if not pkl:
            if any(n.endswith("/constants.pkl") for n in names):
                raise RuntimeError("llgrad.load: this is a TorchScript archive "
                                   "(torch.jit.save), not a torch.save checkpoint")
            raise RuntimeError("llgrad.load: the archive has no data.pkl record")
        prefix = pkl[0][:-len("data.pkl")]
        if any(n.endswith("/constants.pkl") for n in names if n.startswith(prefix)) and \
                any(n.startswith(prefix + "code/") for n in names):
            raise RuntimeError("llgrad.load: this is a TorchScript archive (torch.jit.save), "
                               "not a torch.save checkpoint")
        loader = _Loader(zf, prefix, map_location)
        allowed = _torch_globals(loader)
        data = io.BytesIO(zf.read(pkl[0]))
        pickle_load_args.setdefault("encoding", "utf-8")
        if weights_only:
            unpickler = _SafeUnpickler(data, loader, allowed, **pickle_load_args)
            try:
                result = unpickler.load()
            except _WeightsOnlyError as e:
                raise pickle.UnpicklingError(_weights_only_message(str(e))) from None
        else:
            result = _FullUnpickler(data, loader, allowed, **pickle_load_args).load()
    if loader.widened:
        warnings.warn("llgrad.load: llgrad has no bfloat16; bfloat16 storages were loaded as "
                      "float32 (exactly)", stacklevel=2)
    return result
