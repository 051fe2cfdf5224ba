"""Files and directories a traced run reads or writes through a library: found while the
trace runs, so the call stays eager.

A compiled call runs the graph, not the function's Python: what the traced run read from a
file (`Path.read_text()`, `np.load`, `json.load(open(...))` in a helper, `os.listdir`) is
replayed as a constant, and what it wrote (`np.save`, a log file) is not written again. The
bytecode scan (code_reads.py) sees the builtins open() and input() named in the function's
own code; a read inside a library or a helper of the user's reaches the OS through a few
functions of the io and os modules, which `recording()` wraps while the trace runs, on the
tracing thread only (other threads pass straight through). A call of one of them made for
the user's code, the frames between it and the user's line being libraries' (the standard
library, installed packages, llgrad's own API as llgrad.save), is noted with that line; the
compiled function then keeps the traced run's result (eager's) and runs such calls eagerly,
with a warning naming the line. Calls llgrad's machinery makes (the kernel cache, its
bytecode, source lines read for a message or a warning) are not the user's and are not
noted.

Not seen: a file object opened before the call and read inside it (the guard walk saves the
objects it reaches: snapshot.py), a function bound before the trace (`from os import
listdir`), and C code opening files itself (sqlite3, h5py's C library)."""
import builtins
import contextlib
import io
import os
import sys
import threading

from ..runtime.saved_tensor import users_file
from ..runtime.user_frames import in_package

# (module, attribute) of what the OS is reached through, as Python code calls it
_WRAPPED = ((builtins, "open"), (io, "open"), (os, "open"), (os, "listdir"), (os, "scandir"),
            (os, "stat"), (os, "remove"), (os, "unlink"), (os, "rename"), (os, "replace"),
            (os, "mkdir"), (os, "rmdir"), (os, "truncate"))
# llgrad's machinery (not its API): what it reads and writes is its own
_MACHINERY = tuple(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                d) for d in ("compile", "codegen", "tracer", "ir", "runtime",
                                             "_bytecode.py", "_logging.py"))
# standard modules that read source lines for a message (a warning's, a traceback's) and the
# import system: their reads are not the user's
_SOURCE_READERS = ("linecache.py", "tokenize.py", "traceback.py", "warnings.py", "inspect.py",
                   "<frozen importlib._bootstrap>", "<frozen importlib._bootstrap_external>",
                   "<frozen zipimport>")

_state = threading.local()      # .notes: [(what, where)] of the innermost recording, or None
_lock = threading.Lock()
_active = [0]                   # recordings under way, all threads (the wrappers are in place
_originals = {}                 # while it is not 0)


def _users_line(frame):
    """'file.py:line' of the user's frame a call of a wrapped function was made for, or None
    (llgrad's machinery made it, or a reader of source lines)."""
    while frame is not None:
        name = frame.f_code.co_filename
        base = os.path.basename(name)
        if base in _SOURCE_READERS or name.startswith("<frozen"):
            return None
        if in_package(name):
            if os.path.abspath(name).startswith(_MACHINERY):
                return None
        elif users_file(name):
            return f"{base}:{frame.f_lineno}"
        frame = frame.f_back
    return None


def _wrap(what, fn):
    def wrapper(*args, **kwargs):
        notes = getattr(_state, "notes", None)
        if notes is not None:
            where = _users_line(sys._getframe(1))
            if where is not None:
                notes.append((what, where))
        return fn(*args, **kwargs)
    wrapper.__wrapped__ = fn
    wrapper.__name__, wrapper.__qualname__ = fn.__name__, getattr(fn, "__qualname__", what)
    wrapper.__doc__ = fn.__doc__
    return wrapper


def _install():
    for module, name in _WRAPPED:
        fn = getattr(module, name)
        _originals[(module, name)] = fn
        setattr(module, name, _wrap(f"{module.__name__}.{name}", fn))


def _uninstall():
    for (module, name), fn in _originals.items():
        setattr(module, name, fn)
    _originals.clear()


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
    verb = "lists or inspects a directory" if what.endswith(("listdir", "scandir", "stat")) \
        else "reads or writes a file"
    more = f" (and {len(notes) - 1} more)" if len(notes) > 1 else ""
    return f"it {verb} through {what}() at {where}{more}, which a compiled call would not do again"
