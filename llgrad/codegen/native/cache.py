"""The on-disk kernel cache: object code keyed by what determines it, loaded only when its
recorded hash proves it is the file that was written for that key.

A kernel's key is the SHA-256 of the graph's canonical IR text, the lowering options,
llgrad's version, the LLVM version, and the host CPU name and features (see jit.key_for).
Its file, `<key>.llk` in the cache directory, holds:

    b"LLGRADK1"  u64 header length  header (JSON)  payload

The header records the key, the entry symbol, the payload's SHA-256 and the sizes of the
payload's three parts: the object file, then the LLVM IR before and after optimisation
(zlib-compressed, for dumps). A file that is truncated, corrupt, or written for another key
(a swapped file) fails these checks and is rebuilt; nothing in it is executed or unpickled.

The directory is LLGRAD_CACHE_DIR, else $XDG_CACHE_HOME/llgrad, else ~/.cache/llgrad;
LLGRAD_CACHE_DIR=0 turns the disk cache off. It is created private to the user (0700) and
refused (with one warning; kernels then live in memory only) if it is not a directory
owned by the user that only the user can write. Files are written to a private temporary
file and renamed into place, so concurrent writers (threads or processes) never expose a
partial file: the last rename wins and every candidate is complete."""
import hashlib
import json
import os
import struct
import tempfile
import threading
import warnings
import zlib

MAGIC = b"LLGRADK1"
_SUFFIX = ".llk"
_warned = set()                 # directories already warned about (one warning each)
_lock = threading.Lock()


def _reset():
    """Forget which directories were warned about (tests)."""
    with _lock:
        _warned.clear()


def _warn_once(path, why):
    with _lock:
        if path in _warned:
            return
        _warned.add(path)
    warnings.warn(f"llgrad: kernel cache directory {path!r} {why}; compiled kernels are "
                  "kept in memory only (set LLGRAD_CACHE_DIR to a private writable "
                  "directory, or to 0 to silence this)", RuntimeWarning, stacklevel=4)


def cache_dir():
    """The usable cache directory (created if missing), or None when disabled/unusable."""
    path = os.environ.get("LLGRAD_CACHE_DIR")
    if path == "0":
        return None
    if not path:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(
            os.path.expanduser("~"), ".cache")
        path = os.path.join(base, "llgrad")
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        st = os.stat(path)
    except OSError as e:
        _warn_once(path, f"cannot be created ({e.strerror})")
        return None
    if hasattr(os, "getuid"):
        if st.st_uid != os.getuid():
            _warn_once(path, "is owned by another user")
            return None
        if st.st_mode & 0o022:
            _warn_once(path, "is writable by other users")
            return None
    if not os.access(path, os.W_OK | os.X_OK):
        _warn_once(path, "is not writable")
        return None
    return path


def _file(directory, key):
    return os.path.join(directory, key + _SUFFIX)


def load(key):
    """(entry, object bytes, ir_before, ir_after) from the file for key, or None when
    there is no file or it fails any check (it will be rebuilt and overwritten)."""
    directory = cache_dir()
    if directory is None:
        return None
    try:
        with open(_file(directory, key), "rb") as f:
            data = f.read()
    except OSError:
        return None
    return _decode(data, key)


def _decode(data, key):
    if len(data) < len(MAGIC) + 8 or not data.startswith(MAGIC):
        return None
    (hlen,) = struct.unpack_from("<Q", data, len(MAGIC))
    start = len(MAGIC) + 8
    if hlen > len(data) - start:
        return None
    try:
        header = json.loads(data[start:start + hlen].decode("utf-8"))
        sizes = [int(n) for n in header["sizes"]]
        if header["key"] != key or len(sizes) != 3 or min(sizes) < 0:
            return None
        payload = data[start + hlen:]
        if len(payload) != sum(sizes) or \
                hashlib.sha256(payload).hexdigest() != header["sha256"]:
            return None
        obj = payload[:sizes[0]]
        before = zlib.decompress(payload[sizes[0]:sizes[0] + sizes[1]]).decode("utf-8")
        after = zlib.decompress(payload[sizes[0] + sizes[1]:]).decode("utf-8")
        entry = str(header["entry"])
    except (ValueError, KeyError, TypeError, zlib.error, UnicodeDecodeError):
        return None
    return entry, obj, before, after


def encode(key, entry, obj, ir_before, ir_after):
    parts = [bytes(obj), zlib.compress(ir_before.encode("utf-8")),
             zlib.compress(ir_after.encode("utf-8"))]
    payload = b"".join(parts)
    header = json.dumps({"key": key, "entry": entry, "sizes": [len(p) for p in parts],
                         "sha256": hashlib.sha256(payload).hexdigest()}).encode("utf-8")
    return MAGIC + struct.pack("<Q", len(header)) + header + payload


def store(key, entry, obj, ir_before, ir_after):
    """Write the file for key atomically; a failure to write warns once and is otherwise
    harmless (the kernel is already in memory)."""
    directory = cache_dir()
    if directory is None:
        return
    data = encode(key, entry, obj, ir_before, ir_after)
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=_SUFFIX)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, _file(directory, key))
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
    except OSError as e:
        _warn_once(directory, f"cannot be written ({e.strerror})")
