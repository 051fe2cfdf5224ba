"""The kernel cache's directory: found, created private, opened once and checked, then used
only through its descriptor (cache.py's docstring gives the whole design and what it
protects against).

A directory is opened (per process and path) with O_DIRECTORY | O_NOFOLLOW and kept only
if fstat of that descriptor says it is a directory of the effective user that neither
group nor others may write; else it is refused with one warning and kernels live in memory
only. Each use compares the path's lstat with the descriptor: a directory swapped since is
retired (closed once its last user is done) and the path opened and checked afresh.

`_lock` guards the state of the whole cache: the warnings given (`_warned`), the open
directories (`_dirs`) and the signing keys read (cache_key.py's `_keys`). Its one
register_at_fork handler is here."""
import errno
import os
import stat
import threading
import warnings
from contextlib import contextmanager

_POSIX = all(hasattr(os, n) for n in ("O_NOFOLLOW", "O_DIRECTORY", "geteuid")) and \
    os.open in os.supports_dir_fd
_DIR_FLAGS = (os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) |
              getattr(os, "O_CLOEXEC", 0))
_READ_FLAGS = (os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) |
               getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
_CREATE_FLAGS = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) |
                 getattr(os, "O_CLOEXEC", 0))

_lock = threading.Lock()
_warned = set()                 # directories (and key files) warned about: one warning each
_dirs = {}                      # absolute path -> _Dir in use


class _Dir:
    """An opened, checked cache directory: its descriptor, and who is using it."""
    __slots__ = ("path", "fd", "ident", "users", "retired", "swept")

    def __init__(self, path, fd, st):
        self.path, self.fd, self.ident = path, fd, (st.st_dev, st.st_ino)
        self.users, self.retired, self.swept = 0, False, False


def _reset():
    """Forget warnings and open directories (tests; no other thread may be using the
    cache). cache._reset also forgets the keys."""
    with _lock:
        _warned.clear()
        for d in _dirs.values():
            _close(d)
        _dirs.clear()


def _close(d):
    try:
        os.close(d.fd)
    except OSError:
        pass


def _after_fork_in_child():
    # (another thread of the parent may have held it: the child has only this thread)
    _lock._at_fork_reinit()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _first_warning(what):
    """Whether `what` (a directory, or a ("key", path)) has not been warned about yet; it
    counts as warned from now on."""
    with _lock:
        if what in _warned:
            return False
        _warned.add(what)
        return True


def _warn_once(path, why):
    if _first_warning(path):
        warnings.warn(f"llgrad: kernel cache directory {path!r} {why}; compiled kernels are "
                      "kept in memory only (set LLGRAD_CACHE_DIR to a private writable "
                      "directory, or to 0 to silence this)", RuntimeWarning, stacklevel=4)


# ---- whole files through a descriptor ---------------------------------------------------
def _read_all(fd, limit):
    parts, n = [], 0
    while n < limit:
        b = os.read(fd, min(limit - n, 1 << 20))
        if not b:
            break
        parts.append(b)
        n += len(b)
    return b"".join(parts)


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


# ---- where ------------------------------------------------------------------------------
def _configured_dir():
    path = os.environ.get("LLGRAD_CACHE_DIR")
    if path == "0":
        return None
    if not path:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(
            os.path.expanduser("~"), ".cache")
        path = os.path.join(base, "llgrad")
    return os.path.abspath(path)


def _open_private_dir(path):
    """A descriptor of directory `path`, opened O_DIRECTORY | O_NOFOLLOW (its last
    component must not be a symlink; its parents may be, ~/.cache often is); it and any
    missing parents are created, each made mode 0700 by fchmod whatever the umask. Raises
    OSError."""
    try:
        return os.open(path, _DIR_FLAGS)
    except FileNotFoundError:
        pass
    missing, head = [], path
    while True:                          # the deepest ancestor that exists
        head, tail = os.path.split(head)
        if not tail:
            raise FileNotFoundError(errno.ENOENT, "no ancestor exists", path)
        missing.append(tail)
        try:
            parent = os.open(head, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            break
        except FileNotFoundError:
            continue
    try:
        for name in reversed(missing):
            try:
                os.mkdir(name, 0o700, dir_fd=parent)
                made = True
            except FileExistsError:      # (another process made it meanwhile)
                made = False
            fd = os.open(name, _DIR_FLAGS, dir_fd=parent)
            os.close(parent)
            parent = fd
            if made:
                os.fchmod(fd, 0o700)
    except BaseException:
        os.close(parent)
        raise
    return parent


def _refusal(st, euid):
    """Why a directory's fstat makes it unsafe, or None."""
    if not stat.S_ISDIR(st.st_mode):
        return "is not a directory"
    if st.st_uid != euid:
        return f"is owned by another user (uid {st.st_uid}; this process runs as {euid})"
    if st.st_mode & 0o022:
        return (f"is writable by other users (mode {stat.S_IMODE(st.st_mode):04o}; "
                "make it 0700 or 0755)")
    return None


def _open_checked(path):
    """(_Dir, None) for a usable directory at path, else (None, why)."""
    try:
        fd = _open_private_dir(path)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            try:
                link = stat.S_ISLNK(os.lstat(path).st_mode)
            except OSError:
                link = False
            if link or e.errno == errno.ELOOP:
                return None, "is a symbolic link (refused: where it points can change)"
            return None, "is not a directory"
        return None, f"cannot be created or opened ({e.strerror})"
    try:
        st = os.fstat(fd)
        why = _refusal(st, os.geteuid())
        if why is None and not os.access(path, os.W_OK | os.X_OK):
            why = "is not writable"
    except OSError as e:
        why = f"cannot be checked ({e.strerror})"
    if why is not None:
        os.close(fd)
        return None, why
    return _Dir(path, fd, st), None


def _still_good(d):
    """Whether d's descriptor is still the directory at its path, and still safe."""
    try:
        now = os.stat(d.path, follow_symlinks=False)
        st = os.fstat(d.fd)
    except OSError:
        return False
    return (now.st_dev, now.st_ino) == d.ident and _refusal(st, os.geteuid()) is None


@contextmanager
def _directory(sub=None):
    """The checked cache directory (a _Dir) for the duration of a use, or None; sub: a
    directory of its own inside it (llgrad's module bytecode: _bytecode.py), used only
    where the cache directory itself passes its checks (and checked as it is)."""
    path = _configured_dir() if _POSIX else None
    if path is not None and sub:
        with _directory() as parent:
            path = None if parent is None else os.path.join(path, sub)
    d = None
    if path is not None:
        why = None
        with _lock:
            d = _dirs.get(path)
            if d is not None and not _still_good(d):
                _retire(d)
                d = None
            if d is None:
                d, why = _open_checked(path)
                if d is not None:
                    _dirs[path] = d
            if d is not None:
                d.users += 1
        if why is not None:
            _warn_once(path, why)
    try:
        yield d
    finally:
        if d is not None:
            with _lock:
                d.users -= 1
                if d.retired and d.users == 0:
                    _close(d)


def _retire(d):
    """(under _lock) Stop handing d out; close it once nobody is using it."""
    if _dirs.get(d.path) is d:
        del _dirs[d.path]
    d.retired = True
    if d.users == 0:
        _close(d)


def cache_dir():
    """The path of the usable cache directory (created if missing), or None when the disk
    cache is off or the directory is refused."""
    with _directory() as d:
        return None if d is None else d.path
