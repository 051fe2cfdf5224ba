"""llgrad.save: the object pickled with PyTorch's names (tensors as torch._utils rebuild
calls over persistent storage ids) into a zip archive laid out as torch.save lays it out
(records stored, each record's data aligned to 64 bytes, sizes in data descriptors)."""
from __future__ import annotations
import hashlib
import io
import os
import pickle
import struct
import sys
import types
import zipfile
from collections import OrderedDict
from typing import IO

import numpy as np

from ..nn.parameter import Parameter
from ..quantized_tensor import QuantizedDtype, QuantizedTensor, qscheme
from ..ir import bfloat16 as bf16_values
from ..runtime import dtypes
from ..runtime.device import device
from ..runtime.functions_config import layout
from ..runtime.tensor import Size, Storage, Tensor
from .torch_names import (_QSCHEME_NAME, _QUANTIZED_STORAGE, _REBUILD_FROM_TYPE_V2,
                          _REBUILD_PARAMETER, _REBUILD_PARAMETER_WITH_STATE, _REBUILD_QTENSOR,
                          _REBUILD_SPARSE, _REBUILD_TENSOR_V2,
                          _STORAGE_TYPE, _GET_LAYOUT,
                          _TORCH_DEVICE, _TORCH_NAMES, _TORCH_SIZE, _TORCH_TENSOR, _OtherDtype,
                          _StorageType, _TorchName)

DEFAULT_PROTOCOL = 2
_REBUILD_META = _TorchName("torch._utils", "_rebuild_meta_tensor_no_storage")
_ALIGN = 64


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
    return dtypes._BY_NP[arr.dtype]      # (a tensor's own memory: bfloat16's included)


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

    def _qtensor_args(self, q):
        """torch._utils._rebuild_qtensor's arguments: its integers in a QInt8Storage (...)
        record of their own, the scheme and its parameters."""
        rec = self._writer.own(q._ints)
        pid = _StoragePid(("storage", _TorchName("torch", _QUANTIZED_STORAGE[q.dtype]), rec[0],
                           "cpu", rec[2]))
        scheme = q.qscheme()
        if q._axis is None:
            params = (scheme, q.q_scale(), q.q_zero_point())
        else:
            params = (scheme, q.q_per_channel_scales(), q.q_per_channel_zero_points(), q._axis)
        return (pid, 0, tuple(q._ints.shape), tuple(q.stride()), params, False, OrderedDict())

    def reducer_override(self, obj):
        if isinstance(obj, Tensor) and obj.is_sparse:     # (PyTorch's: its two tensors)
            kind = _Reduced(_GET_LAYOUT, ("torch.sparse_coo",))
            return (_REBUILD_SPARSE, (kind, (obj._indices(), obj._values(), obj.shape,
                                               obj.is_coalesced())))
        if isinstance(obj, Tensor) and obj.is_meta:      # (PyTorch's: no storage, no data)
            args = (obj.dtype, tuple(obj.shape), obj.stride(), obj.requires_grad)
            if isinstance(obj, Parameter):
                return (_REBUILD_PARAMETER, (_Reduced(_REBUILD_META, args[:3] + (False,)),
                                             obj.requires_grad, OrderedDict()))
            return (_REBUILD_META, args)
        if isinstance(obj, Tensor):
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
        if type(obj) is QuantizedTensor:
            return (_REBUILD_QTENSOR, self._qtensor_args(obj))
        if type(obj) is _Reduced:
            return (obj.func, obj.args)
        if type(obj) is Size:
            return (_TORCH_SIZE, (tuple(obj),))
        if type(obj) is device:
            return (_TORCH_DEVICE, obj.__reduce__()[1])
        if type(obj) is layout:             # (PyTorch's: torch.serialization._get_layout)
            return (_GET_LAYOUT, ("torch." + str.__str__(obj),))
        return NotImplemented

    def save_global(self, obj, name=None):
        # PyTorch pickles with the C pickler: its errors for an object that cannot be named
        # (a local class or function, a lambda) differ in type and text from the pure one's
        qual = name or getattr(obj, "__qualname__", None) or obj.__name__
        if "<locals>" in qual.split("."):
            raise AttributeError(f"Can't pickle local object {qual!r}")
        try:
            super().save_global(obj, name)
        except pickle.PicklingError as e:
            if "it's not found as" not in str(e):
                raise
            module = pickle.whichmodule(obj, qual)
            raise pickle.PicklingError(f"Can't pickle {obj!r}: attribute lookup {qual} on "
                                       f"{module} failed") from None

    def _write_global(self, module, name, obj):
        self.write(pickle.GLOBAL + module.encode("utf-8") + b"\n" + name.encode("utf-8")
                   + b"\n")
        self.memoize(obj)

    def _save_torch_name(self, obj):
        self._write_global(obj.module, obj.name, obj)

    def _save_dtype(self, obj):
        self._write_global("torch", _TORCH_NAMES[obj][0] if obj in _TORCH_NAMES else obj.name,
                           obj)

    def _save_qscheme(self, obj):
        name = _QSCHEME_NAME[obj]
        self._write_global(name.module, name.name, obj)

    def _save_other_dtype(self, obj):
        self._write_global("torch", obj.name, obj)

    def _save_storage_type(self, obj):
        self._write_global("torch", obj.name, obj)

    dispatch[types.FunctionType] = save_global
    dispatch[_TorchName] = _save_torch_name
    dispatch[dtypes.dtype] = _save_dtype
    dispatch[qscheme] = _save_qscheme
    dispatch[QuantizedDtype] = _save_dtype
    # a loaded checkpoint saved again (weights_only=False can hold these) names them as PyTorch
    dispatch[_OtherDtype] = _save_other_dtype
    dispatch[_StorageType] = _save_storage_type


class _Reduced:
    """A nested rebuild call (the tensor inside a Parameter's rebuild)."""
    __slots__ = ("func", "args")

    def __init__(self, func, args):
        self.func, self.args = func, args


def _obj_state(t):
    """Attributes a user set on a tensor (PyTorch saves them); llgrad's own are slots."""
    d = getattr(t, "__dict__", None)
    d = {k: v for k, v in d.items() if k != "_grad_dtype"} if d else None  # (not saved)
    return d or None


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


def save(obj: object, f: str | os.PathLike | IO[bytes], pickle_module: object = pickle,
         pickle_protocol: int = DEFAULT_PROTOCOL, _use_new_zipfile_serialization: bool = True,
         _disable_byteorder_record: bool = False) -> None:
    """Save obj to f (a path or a writable binary file object) in PyTorch's zip checkpoint
    format: torch.load reads the file (with weights_only=True when obj holds only tensors,
    containers and plain values) and llgrad.load reads it back."""
    if not _use_new_zipfile_serialization:
        raise NotImplementedError("llgrad.save writes only the zip format "
                                  "(_use_new_zipfile_serialization=True)")
    if pickle_module is not pickle:
        raise NotImplementedError("llgrad.save pickles with the standard pickle module")
    if not isinstance(f, (str, os.PathLike)) and not hasattr(f, "write"):     # (PyTorch's)
        raise AttributeError("expected 'f' to be string, path, or a file-like object with a "
                             "'write' attribute")
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
                if flat.dtype == bf16_values.STORAGE:     # (2-byte words: float32's high halves)
                    flat = (flat.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
                raw = np.ascontiguousarray(flat).view(np.uint8).reshape(-1)
                digest.update(raw.data)
                _zip_record(zf, f"archive/data/{key}", raw.data)
            _zip_record(zf, "archive/version", b"3\n")
            sid = "%040d" % (int(digest.hexdigest(), 16) % 10 ** 40)
            _zip_record(zf, "archive/.data/serialization_id", sid.encode())

    if isinstance(f, (str, os.PathLike)):
        parent = os.path.dirname(os.fspath(f))
        if parent and not os.path.isdir(parent):        # (PyTorch's check, before writing)
            raise RuntimeError(f"Parent directory {parent} does not exist.")
        with open(f, "wb") as fp:
            write_archive(fp)
    else:
        out = io.BytesIO()
        write_archive(out)
        f.write(out.getvalue())
        if hasattr(f, "flush"):
            f.flush()
