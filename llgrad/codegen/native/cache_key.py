"""The per-user key that signs kernel cache entries (cache.py's docstring gives the whole
design and what it protects against).

32 random bytes, made on first use, in the file LLGRAD_CACHE_KEY_FILE, else
$XDG_DATA_HOME/llgrad/cache-key, else ~/.local/share/llgrad/cache-key: outside the cache
directory (a key inside it is refused: an entry copied in with its key would pass as
signed), mode 0600, in a directory of the user's that others cannot write (llgrad makes it
0700). A key that is a symlink, not a regular file, someone else's, readable by others or
of the wrong size is refused with one warning, and kernels then live in memory only.

The keys read are kept in `_keys`, under cache_dir.py's `_lock` (the cache's one lock)."""
import errno
import os
import secrets
import stat
import warnings

from .cache_dir import (_CREATE_FLAGS, _READ_FLAGS, _configured_dir, _first_warning, _lock,
                        _open_private_dir, _read_all, _refusal, _write_all)

KEY_BYTES = 32
_KEY_NAME = "cache-key"

_keys = {}                      # key file path -> the signing key read from it


def _reset():
    """Forget the keys read (tests; no other thread may be using the cache)."""
    with _lock:
        _keys.clear()


def _warn_key_once(path, why):
    if _first_warning(("key", path)):
        warnings.warn(f"llgrad: kernel cache signing key {path!r} {why}; compiled kernels "
                      "are kept in memory only (set LLGRAD_CACHE_KEY_FILE to a file only you "
                      "can read, or LLGRAD_CACHE_DIR=0 to silence this)", RuntimeWarning,
                      stacklevel=4)


def key_file():
    """The path of the signing key (LLGRAD_CACHE_KEY_FILE, else under the data dir)."""
    path = os.environ.get("LLGRAD_CACHE_KEY_FILE")
    if not path:
        base = os.environ.get("XDG_DATA_HOME") or os.path.join(
            os.path.expanduser("~"), ".local", "share")
        path = os.path.join(base, "llgrad", _KEY_NAME)
    return os.path.abspath(path)


def _signing_key(cache):
    """The user's signing key (made on first use), or None (with one warning) when it
    cannot be made or read safely. `cache`: the _Dir it must not live in."""
    path = key_file()
    with _lock:
        k = _keys.get(path)
    if k is not None:
        return k
    try:
        k = _read_or_make_key(path, cache)
    except _KeyRefused as e:
        _warn_key_once(path, str(e))
        return None
    except OSError as e:
        _warn_key_once(path, f"cannot be made or read ({e.strerror})")
        return None
    with _lock:
        return _keys.setdefault(path, k)


class _KeyRefused(Exception):
    pass


def _read_or_make_key(path, cache):
    directory, name = os.path.split(path)
    # (cache may be a subdirectory, `modules` or `plans`: the key must not be anywhere in
    # the cache directory itself either, or it would be accepted there and then kept)
    real = os.path.realpath(directory) + os.sep
    top = _configured_dir()
    if any(real.startswith(os.path.realpath(c) + os.sep)
           for c in (cache.path, top) if c is not None):
        raise _KeyRefused("is inside the cache directory (an entry copied in with its key "
                          "would pass as signed): keep it elsewhere")
    dfd = _open_private_dir(directory)
    try:
        st = os.fstat(dfd)
        if (st.st_dev, st.st_ino) == cache.ident:
            raise _KeyRefused("is inside the cache directory: keep it elsewhere")
        why = _refusal(st, os.geteuid())
        if why is not None:
            raise _KeyRefused(f"lives in a directory that {why}")
        for _ in range(2):
            k = _read_key(dfd, name)
            if k is not None:
                return k
            _make_key(dfd, name)         # (loses quietly to a concurrent maker)
        raise _KeyRefused("could not be read after it was made")
    finally:
        os.close(dfd)


def _read_key(dfd, name):
    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=dfd)
    except FileNotFoundError:
        return None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise _KeyRefused("is a symbolic link") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _KeyRefused("is not a regular file")
        if st.st_uid != os.geteuid():
            raise _KeyRefused(f"is owned by another user (uid {st.st_uid})")
        if st.st_mode & 0o077:
            raise _KeyRefused(f"may be read or written by other users (mode "
                              f"{stat.S_IMODE(st.st_mode):04o}; it must be 0600)")
        data = _read_all(fd, KEY_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) != KEY_BYTES:
        raise _KeyRefused(f"holds {len(data)} bytes, not {KEY_BYTES}")
    return data


def _make_key(dfd, name):
    tmp = f".{name}-{os.getpid()}-{secrets.token_hex(6)}"
    fd = os.open(tmp, _CREATE_FLAGS, 0o600, dir_fd=dfd)
    try:
        try:
            os.fchmod(fd, 0o600)
            _write_all(fd, secrets.token_bytes(KEY_BYTES))
            os.fsync(fd)
        finally:
            os.close(fd)
        try:                             # link, not rename: never replaces another's key
            os.link(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd, follow_symlinks=False)
        except FileExistsError:
            pass
    finally:
        try:
            os.unlink(tmp, dir_fd=dfd)
        except OSError:
            pass
