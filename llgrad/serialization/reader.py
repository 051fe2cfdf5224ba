"""llgrad.load: the archive is opened and checked (a torch.save zip, not the legacy format
nor TorchScript), data.pkl is unpickled by the restricted or the full unpickler, and each
storage it names is read from its record once (byte order and bfloat16 converted), mapped
to a location and shared by every tensor rebuilt over it."""
from __future__ import annotations
import _compat_pickle
import io
import os
import pickle
import pickletools
import sys
import zipfile
from typing import IO

import numpy as np

from ..ir import bfloat16 as bf16_values
from ..runtime import dtypes
from ..runtime.device import as_device, device
from ..runtime.meta_tensor import meta_storage
from ..runtime.tensor import Storage, Tensor
from .allowlist import user_globals
from .torch_globals import _torch_globals
from .torch_names import _StorageType
from .unpickler import _FullUnpickler, _SafeUnpickler, _WeightsOnlyError, _weights_only_message


class NotACheckpointError(RuntimeError, pickle.UnpicklingError):
    """Bytes that are no checkpoint: torch.load raises pickle.UnpicklingError for them, and
    llgrad.load's other errors are RuntimeErrors; both catch it."""


class EmptyCheckpointError(NotACheckpointError, EOFError):
    """An empty file (or nothing left to read in it): torch.load raises EOFError."""


class _Loader:
    """One load: the archive, its storages (loaded once each, shared by their tensors) and
    the location mapping."""

    def __init__(self, zf, prefix, map_location):
        self.zf, self.prefix, self.map_location = zf, prefix, map_location
        self.storages = {}
        self.storage_ids = set()
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
        if npdt.kind == "V":        # bfloat16: the high halves of float32s (ir/bfloat16.py)
            bits = np.frombuffer(raw, dtype=np.uint16)
            if self.byteorder != sys.byteorder:
                bits = bits.byteswap()
            arr = (bits.astype(np.uint32) << 16).view(np.float32).astype(bf16_values.STORAGE)
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
        if dev.type == "meta":          # (shapes and dtypes only: meta tensors)
            return meta_storage(st.base)
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


def load(f: str | os.PathLike | IO[bytes], map_location: object = None,
         pickle_module: object = None, *, weights_only: bool | None = None,
         mmap: bool | None = None, **pickle_load_args: object) -> object:
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
    # mmap: PyTorch maps the file copy-on-write (writes to the loaded tensors stay in memory);
    # storages read into memory behave the same
    if mmap and not isinstance(f, (str, os.PathLike)):
        raise ValueError("f must be a file path in order to use the mmap argument")
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
        if head[:1] == b"\x80" and mmap:
            raise RuntimeError("mmap can only be used with files saved with `torch.save("
                               f"{f}, _use_new_zipfile_serialization=True), please torch.save "
                               "your checkpoint with this option in order to use mmap.")
        if head[:1] == b"\x80":
            raise RuntimeError("llgrad.load reads PyTorch's zip checkpoint format (what "
                               "torch.save writes since PyTorch 1.6); this file is in the "
                               "legacy format: load it with torch.load and save it again with "
                               "torch.save")
        if not head:        # (PyTorch's unpickler runs out of input: EOFError)
            raise EmptyCheckpointError("Ran out of input")
        raise NotACheckpointError("llgrad.load: the file is not a PyTorch checkpoint (not a "
                                  "zip archive)")
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
    return result


def get_unsafe_globals_in_checkpoint(f: str | os.PathLike | IO[bytes]) -> list[str]:
    """The globals ("module.name") a checkpoint's pickle names that a weights_only load would
    refuse (neither allowed by default nor by add_safe_globals), as
    torch.serialization.get_unsafe_globals_in_checkpoint (read from the GLOBAL opcodes, not
    unpickled)."""
    fp = _open_archive(f)
    if not zipfile.is_zipfile(fp):
        raise ValueError("Expected input to be a checkpoint returned by torch.save")
    with zipfile.ZipFile(fp) as zf:
        names = zf.namelist()
        if any(n.endswith("/constants.pkl") for n in names):
            raise ValueError("Expected input to be a checkpoint returned by torch.save but got a "
                             "torchscript checkpoint")
        pkl = [n for n in names if n.endswith("/data.pkl") and n.count("/") == 1]
        data = zf.read(pkl[0]) if pkl else b""
    found = set()
    for op, arg, _ in pickletools.genops(data):
        if op.name == "GLOBAL":
            module, name = arg.split(" ", 1)
            found.add(f"{_compat_pickle.IMPORT_MAPPING.get(module, module)}.{name}")
    return list(found - set(_torch_globals(None)) - set(user_globals()))
