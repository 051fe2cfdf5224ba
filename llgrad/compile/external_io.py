"""Files and directories a traced run reads or writes through a library: found while the
trace runs, so the call stays eager.

A compiled call runs the graph, not the function's Python: what the traced run read from a
file (`Path.read_text()`, `np.load`, `json.load(open(...))` in a helper, `os.listdir`) is
replayed as a constant, and what it wrote (`np.save`, a log file) is not written again. The
bytecode scan (code_reads.py) sees the builtins open() and input() named in the function's
own code; a read inside a library or a helper of the user's reaches the OS through a few
functions of the io and os modules (and subprocess's, sqlite3.connect, NumPy's table of
openers), which `recording()` wraps while the trace runs, noting the tracing thread's calls
only (other threads pass straight through; os's own Python code, os.walk and os.path, is a
library's, though frozen). A call of one of them made for
the user's code, the frames between it and the user's line being libraries' (the standard
library, installed packages, llgrad's own API as llgrad.save), is noted with that line; the
compiled function then keeps the traced run's result (eager's) and runs such calls eagerly,
with a warning naming the line. Calls llgrad's machinery makes (the kernel cache, its
bytecode, source lines read for a message or a warning) are not the user's and are not
noted.

A module imported by the call runs its code once, eagerly too (the next call finds it in
sys.modules): what its loading reads is not noted. A function bound before the trace (`from
os import listdir`, os.getenv, io.FileIO) is not reached through these attributes: the
bytecode scan names it (bound_io, called by code_reads.py). Not seen: a file object, an mmap
or a database connection made before the call and read inside it (the guard walk saves the
file objects it reaches: snapshot.py), and C code opening files itself (h5py's C library)."""
import contextlib
import io
import os
import sys
import threading

from ..runtime.saved_tensor import users_file
from ..runtime.user_frames import in_package

# (module, attribute) of what the OS is reached through, as Python code calls it: files,
# directories, commands and processes, databases (a module not loaded when the trace starts
# is left as it is)
_WRAPPED = (("builtins", "open"), ("io", "open"), ("os", "open"), ("os", "listdir"),
            ("os", "scandir"), ("os", "stat"), ("os", "lstat"), ("os", "access"),
            ("os", "readlink"), ("os", "remove"), ("os", "unlink"), ("os", "rename"),
            ("os", "replace"), ("os", "mkdir"), ("os", "rmdir"), ("os", "truncate"),
            ("os", "utime"), ("os", "chmod"), ("os", "symlink"), ("os", "link"),
            ("os", "system"), ("os", "posix_spawn"), ("os", "fork"),
            ("subprocess", "_fork_exec"), ("_posixsubprocess", "fork_exec"),
            ("sqlite3", "connect"), ("bz2", "_builtin_open"), ("tarfile", "bltn_open"))
# (module, class, method): a socket's connection and traffic (what the other end answers
# changes; a socket made before the call included)
_SOCKETS = ("connect", "connect_ex", "send", "sendall", "sendto", "sendmsg", "recv",
            "recv_into", "recvfrom", "recvfrom_into", "recvmsg")
_METHODS = tuple(("socket", "socket", name) for name in _SOCKETS)
_COMMANDS = ("system", "posix_spawn", "fork", "_fork_exec", "fork_exec")
_INSPECTS = ("listdir", "scandir", "stat", "lstat", "access", "readlink")
# what user code can bind before a trace and call past the wrapped attributes: the plain
# functions of _WRAPPED (`from os import listdir`), and readers of files or of the
# environment that reach none of them (io.FileIO opens in C; os.getenv reads os.environ)
_PLAIN = {id(v): (f"{m}.{a}", v) for m, a, v in [
    *((m, a, getattr(sys.modules[m], a, None)) for m, a in _WRAPPED if m in sys.modules),
    ("io", "FileIO", io.FileIO), ("os", "getenv", os.getenv), ("os", "getcwd", os.getcwd)]
    if v is not None}
# llgrad's machinery (not its API): what it reads and writes is its own
_MACHINERY = tuple(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                d) for d in ("compile", "codegen", "tracer", "ir", "runtime",
                                             "_bytecode.py", "_logging.py"))
# standard modules that read source lines for a message (a warning's, a traceback's) and the
# import system: their reads are not the user's
_IMPORTS = ("<frozen importlib._bootstrap>", "<frozen importlib._bootstrap_external>",
            "<frozen zipimport>")
_SOURCE_READERS = ("linecache.py", "tokenize.py", "traceback.py", "warnings.py",
                   "inspect.py") + _IMPORTS

_state = threading.local()      # .notes: [(what, where)] of the innermost recording, or None
_lock = threading.Lock()
_active = [0]                   # recordings under way, all threads (the wrappers are in place
_originals = {}                 # while it is not 0)


def _users_line(frame):
    """'file.py:line' of the user's frame a call of a wrapped function was made for, or None
    (llgrad's machinery made it, a reader of source lines, or a module's code run by an
    import the call made: eager runs that once too)."""
    users = None
    while frame is not None:
        name = frame.f_code.co_filename
        base = os.path.basename(name)
        if base in (_SOURCE_READERS if users is None else _IMPORTS):
            return None
        if name.startswith("<frozen"):  # (the os module's own code: os.walk, os.path)
            pass
        elif in_package(name):
            if os.path.abspath(name).startswith(_MACHINERY):
                return users    # (the trace's own frames: what called the function)
        elif users is None and users_file(name):
            users = f"{base}:{frame.f_lineno}"
        frame = frame.f_back
    return users


def _note(what, frame):
    """Note a call of a wrapped function made at frame, if made for the user's code."""
    notes = getattr(_state, "notes", None)
    if notes is not None:
        _state.notes = None     # (users_file's realpath calls os.lstat)
        try:
            where = _users_line(frame)
        finally:
            _state.notes = notes
        if where is not None:
            notes.append((what, where))


class _Wrapper:
    """A wrapped function: a plain object, not a function, so that a class made while a
    trace runs (`opener = open` in its body) does not bind it as a method; equal to the
    function it wraps (`os.stat in os.supports_dir_fd`)."""

    def __init__(self, what, fn):
        self.what, self.__wrapped__, self.__name__ = what, fn, fn.__name__
        self.__qualname__, self.__doc__ = getattr(fn, "__qualname__", what), fn.__doc__

    def __call__(self, *args, **kwargs):
        _note(self.what, sys._getframe(1))
        return self.__wrapped__(*args, **kwargs)

    def __eq__(self, other):
        return other is self or other is self.__wrapped__

    def __hash__(self):
        return hash(self.__wrapped__)

    def __repr__(self):
        return repr(self.__wrapped__)


def _method(what, fn):
    """A wrapped method: a function, bound as the one it wraps."""
    def method(self, *args, **kwargs):
        _note(what, sys._getframe(1))
        return fn(self, *args, **kwargs)
    method.__wrapped__, method.__name__, method.__doc__ = fn, fn.__name__, fn.__doc__
    return method


def _tables():
    """The dicts a library keeps a wrapped function in, called from there: NumPy's openers
    (np.loadtxt, np.genfromtxt open files through numpy.lib._datasource's io.open)."""
    ds = sys.modules.get("numpy.lib._datasource")
    table = getattr(getattr(ds, "_file_openers", None), "_file_openers", None)
    return [table] if isinstance(table, dict) else []


def _install():
    for m, name in _WRAPPED:
        module = sys.modules.get(m)
        fn = getattr(module, name, None)
        if fn is not None and not isinstance(fn, _Wrapper):
            _originals[(module, name)] = fn
            setattr(module, name, _Wrapper(f"{m}.{name}", fn))
    for m, cls, name in _METHODS:
        owner = getattr(sys.modules.get(m), cls, None)
        fn = getattr(owner, name, None)
        if fn is not None and not hasattr(fn, "__wrapped__"):
            # (None: inherited from a base in C, taken off again at the end)
            _originals[(owner, name)] = vars(owner).get(name)
            setattr(owner, name, _method(f"{m}.{cls}.{name}", fn))
    wrapped = {id(fn): w for (owner, name), fn in _originals.items()
               if isinstance(w := getattr(owner, name), _Wrapper)}
    for table in _tables():
        for k, v in list(table.items()):
            if id(v) in wrapped:
                table[k] = wrapped[id(v)]


def _uninstall():
    for table in _tables():
        for k, v in list(table.items()):
            if isinstance(v, _Wrapper):
                table[k] = v.__wrapped__
    for (owner, name), fn in _originals.items():
        if fn is None:
            delattr(owner, name)
        else:
            setattr(owner, name, fn)
    _originals.clear()


def bound_io(v):
    """'module.function' if v is a function that reads or writes files, a directory, the
    environment or runs a command and a call of it by name is not noted by the wrappers (it
    was bound before the trace: `from os import listdir`, os.getenv), else None."""
    v = v.__wrapped__ if isinstance(v, _Wrapper) else v
    what, fn = _PLAIN.get(id(v), (None, None))
    return what if fn is v else None


@contextlib.contextmanager
def recording():
    """Note, while the block runs on this thread, the calls of the wrapped functions made for
    the user's code: yields the list of (function, 'file.py:line') it fills."""
    notes, outer = [], getattr(_state, "notes", None)
    with _lock:
        if _active[0] == 0:
            _install()
        _active[0] += 1
    _state.notes = notes
    try:
        yield notes
    finally:
        _state.notes = outer
        if outer is not None:
            outer.extend(notes)     # (a trace inside a trace: the outer one read it too)
        with _lock:
            _active[0] -= 1
            if _active[0] == 0:
                _uninstall()


def reason(notes):
    """Why a traced run that made these calls stays eager's, or None."""
    if not notes:
        return None
    what, where = notes[0]
    name = what.rsplit(".", 1)[1]
    verb = "runs a command or a process" if name in _COMMANDS else \
        "opens a database" if what == "sqlite3.connect" else \
        "talks over a socket" if name in _SOCKETS else \
        "lists or inspects a directory" if name in _INSPECTS else "reads or writes a file"
    more = f" (and {len(notes) - 1} more)" if len(notes) > 1 else ""
    return f"it {verb} through {what}() at {where}{more}, which a compiled call would not do again"
