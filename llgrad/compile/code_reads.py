"""What code reads, found in its bytecode: the global names, and the attributes of the
user's modules it reads as `module.attribute`; and whether a file is the user's (not the
standard library's or an installed package's)."""
import collections.abc
import datetime
import dis
import functools
import inspect
import os
import random
import sys
import threading

from ..runtime.saved_tensor import library_dirs, users_file  # noqa: F401 (compile's)
from .class_state import LIBRARIES
from .external_io import bound_io


def function_parts(f):
    """[(name, value)] of what a call of the user's function f reads from f itself besides
    its cells and globals: its defaults (a list default appended to, a tensor default
    written, `f.__defaults__ = ...`), its code (`f.__code__ = ...`) and its attributes
    (`f.calls += 1`)."""
    return [(n, getattr(f, n, None))
            for n in ("__defaults__", "__kwdefaults__", "__code__", "__dict__")]


@functools.lru_cache(maxsize=1024)
def global_names(code):
    """The global names code reads (LOAD_GLOBAL), its nested functions' and
    comprehensions' included, in first-use order."""
    names, stack = {}, [code]
    while stack:
        c = stack.pop()
        for ins in dis.get_instructions(c):
            if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
                names.setdefault(ins.argval, None)
        stack.extend(k for k in c.co_consts if inspect.iscode(k))
    return tuple(names)


@functools.lru_cache(maxsize=1024)
def global_stores(code):
    """The global names code binds (STORE_GLOBAL: `global h; h = ...`), its nested
    functions' included."""
    names, stack = {}, [code]
    while stack:
        c = stack.pop()
        for ins in dis.get_instructions(c):
            if ins.opname == "STORE_GLOBAL":
                names.setdefault(ins.argval, None)
        stack.extend(k for k in c.co_consts if inspect.iscode(k))
    return tuple(names)


@functools.lru_cache(maxsize=1024)
def _attribute_reads(code, loads=("LOAD_GLOBAL", "LOAD_NAME")):
    """The (global name, attribute) pairs code reads as `name.attribute` (LOAD_GLOBAL then
    LOAD_ATTR or LOAD_METHOD; with loads LOAD_DEREF: closure names), its nested code's
    included, in first-use order."""
    pairs, stack = {}, [code]
    while stack:
        c = stack.pop()
        ins = list(dis.get_instructions(c))
        for a, b in zip(ins, ins[1:]):
            if a.opname in loads and \
                    b.opname in ("LOAD_ATTR", "LOAD_METHOD"):
                pairs.setdefault((a.argval, b.argval), None)
        stack.extend(k for k in c.co_consts if inspect.iscode(k))
    return tuple(pairs)


def module_attributes(code, space, closure=None, libraries=False):
    """[(global name, attribute, the module's globals)] of what code reads as
    `module.attribute` of one of the user's modules (a config module's settings, a helper
    in another file reading that file's tensors): reads of that module's globals, walked
    as the function's own (a library's modules are taken as fixed). closure: the function's
    cells, whose modules count too (`import config` in the function that makes it).
    libraries: also a library module's functions, classes and numbers (`F.relu`, `math.pi`),
    guarded by identity or value as torch.compile does: `F.gelu = my_gelu` between calls."""
    out, cells = [], {}
    for name, cell in zip(code.co_freevars, closure or ()):
        try:
            cells[name] = cell.cell_contents
        except ValueError:      # (a cell not yet filled)
            pass
    named = [(n, a, space.get(n)) for n, a in _attribute_reads(code)]
    if cells:
        named += [(n, a, cells.get(n)) for n, a in _attribute_reads(code, ("LOAD_DEREF",))]
    for name, attr, m in named:
        if inspect.ismodule(m) and attr in vars(m) and (users_module(m) or libraries and
                                                        _library_constant(vars(m)[attr])):
            out.append((name, attr, vars(m)))
    return out


def _library_constant(v):
    """A library module's attribute a guard can follow by identity or value: a class, a
    number, a builtin function (not a method bound to an object the walk would enter:
    `random.random`), one of llgrad's, NumPy's... functions, or a function of the user's put
    there (walked as fn's); not another library's Python function, which the walk would
    enter as the user's (`threading.current_thread`: code_reads' own rules cover those)."""
    if isinstance(v, (int, float, str)) or inspect.isclass(v):
        return True
    if inspect.isfunction(v):
        return (v.__module__ or "").startswith(LIBRARIES) or users_file(v.__code__.co_filename)
    return inspect.isbuiltin(v) and (getattr(v, "__self__", None) is None or
                                     inspect.ismodule(v.__self__))


def users_module(m):
    """Whether module m is the user's: loaded from the user's files, or made as the program
    runs (types.ModuleType filled by exec: no file and no import spec, unlike the built-in
    and frozen modules)."""
    if m.__name__.startswith(LIBRARIES):
        return False
    where = vars(m).get("__file__")     # (not a module __getattr__'s answer)
    return users_file(where) if isinstance(where, str) else vars(m).get("__spec__") is None


_DYNAMIC = ("globals", "eval", "exec")      # builtins reading globals no bytecode names
_IDENTITY = ("id",)         # builtins giving an object's identity (a key no guard follows)
# the time module's clocks: each call reads another time (a compiled call would replay the
# traced one, as a constant of its graph or a number it writes)
_CLOCKS = frozenset(("time", "time_ns", "perf_counter", "perf_counter_ns", "monotonic",
                     "monotonic_ns", "process_time", "process_time_ns", "thread_time",
                     "thread_time_ns", "localtime", "gmtime", "ctime", "asctime", "strftime"))


# other functions giving a fresh value at each call: the system's entropy (os.urandom, the
# secrets module, random.SystemRandom), random UUIDs; and datetime's readings of the clock;
# the calling thread and process (a call from another thread, or in a forked worker, gets
# another: a compiled call would print or use the traced call's); the process's counters
# (CPU times, memory, page faults, objects: a step logging its memory)
_FRESH = {"time": _CLOCKS, "posix": ("urandom", "getrandom", "getpid", "getppid", "times",
                                     "getloadavg"),
          "nt": ("urandom", "getpid", "getppid", "times"), "uuid": ("uuid1", "uuid4"),
          "secrets": None, "threading": ("current_thread", "currentThread"),
          "_thread": ("get_ident", "get_native_id"), "resource": ("getrusage",),
          "sys": ("getallocatedblocks", "getrefcount", "gettotalrefcount"),
          "gc": ("get_objects", "get_count", "get_stats", "get_referrers"),
          "_tracemalloc": ("get_traced_memory", "get_tracemalloc_memory")}
_NOW = frozenset(("now", "today", "utcnow"))
# builtins reading a file or the terminal: what they give can change between calls (a file
# another process or the loop around the call rewrites) and no guard follows it
_IO_BUILTINS = ("open", "input")


def _clock(v):
    return getattr(v, "__module__", None) == "time" and getattr(v, "__name__", "") in _CLOCKS


def _fresh(v, code):
    """Whether a call of v (read by code) gives another value each time: a clock, the
    system's entropy, a random UUID; datetime's class or module read by code naming now."""
    if v is datetime or (inspect.isclass(v) and issubclass(v, datetime.date)):
        return bool(_NOW & _names(code))
    if inspect.isclass(v) and issubclass(v, random.SystemRandom):
        return True
    if not inspect.isroutine(v):        # (no attribute read of the user's objects)
        return False
    if type(getattr(v, "__self__", None)) is random.SystemRandom:
        return True
    names = _FRESH.get(getattr(v, "__module__", None), ())
    return names is None or getattr(v, "__name__", "") in names


@functools.lru_cache(maxsize=1024)
def _names(code):
    """The attribute and global names code reads, its nested code's included."""
    out, stack = set(), [code]
    while stack:
        c = stack.pop()
        out.update(c.co_names)
        stack.extend(k for k in c.co_consts if inspect.iscode(k))
    return frozenset(out)


def unguarded_reads(code, space, cells):
    """[(what, why)] of code's reads that no guard can follow: globals() / eval / exec (the
    names they read are not in the bytecode), id() in the user's code (an identity, a dict
    key say), and the mutable containers of a library's modules read as `module.attribute`
    (os.environ, sys.argv: what they hold is not walked), a user's module's attributes
    answered by its __getattr__, and what gives another value at each call (time.time,
    datetime.now, os.urandom, uuid4, secrets: _fresh). cells: {name: value} of code's
    closure. A call of a function that makes them runs eagerly."""
    out = [(f"{name}()", f"{name}(){_line_of(code, name)} reads globals by names compile "
            "cannot see") for name in global_names(code) if name in _DYNAMIC and name not in space]
    why = identity_read(code, space) if users_file(code.co_filename) else None
    out += [("id()", why)] if why else []
    out += fresh_reads(code, space, cells)
    out += unrecorded_writes(code, space, cells)
    out += outside_reads(code, space, cells)
    named = [(n, a, space.get(n)) for n, a in _attribute_reads(code)] + \
        [(n, a, cells.get(n)) for n, a in _attribute_reads(code, ("LOAD_DEREF",))]
    for name, attr, m in named:
        if inspect.ismodule(m) and attr not in vars(m) and "__getattr__" in vars(m) and \
                users_module(m):        # (PEP 562: an answer no namespace holds)
            out.append((f"{name}.{attr}", f"it reads {name}.{attr}{_line_of(code, name)} "
                        "through the module's __getattr__, which compile does not guard"))
        v = getattr(m, attr, None) if inspect.ismodule(m) and not (
            m.__name__.startswith(LIBRARIES) or users_module(m)) else None
        if isinstance(v, (collections.abc.MutableMapping, collections.abc.MutableSequence,
                          collections.abc.MutableSet)):
            out.append((f"{name}.{attr}", f"it reads {name}.{attr}{_line_of(code, name)}, "
                        "whose contents compile does not guard"))
    return out


def _unrecorded_writer(m, attr):
    """What module m's attribute attr writes past the output compile records and compiled
    calls give again (compile/replayed_output.py tees sys.stdout and sys.stderr): the
    interpreter's own streams, a write to a file descriptor, a thread (whose writes are
    another thread's); or None."""
    if m is sys and attr in ("__stdout__", "__stderr__"):
        return f"sys.{attr}, which compile does not record"
    v = getattr(m, attr, None)
    if any(v is w for w in _FD_WRITES):
        return "a file descriptor, which compile does not record"
    if _starts_workers(v):
        return "from a thread or a process it starts, which compile does not record"
    return None


# what starts threads or processes besides threading.Thread: a pool's workers (reading
# files, say) are not the tracing thread, whose calls compile watches (external_io.py)
_WORKERS = ("Pool", "ThreadPool", "Process", "get_context", "ThreadPoolExecutor",
            "ProcessPoolExecutor")


def _starts_workers(v):
    if v is threading.Thread:
        return True
    return (inspect.isclass(v) or inspect.isroutine(v)) and v.__name__ in _WORKERS and \
        str(getattr(v, "__module__", None)).startswith(("multiprocessing", "concurrent.futures"))


_FD_WRITES = tuple(getattr(os, n) for n in ("write", "writev", "pwrite", "pwritev")
                   if hasattr(os, n))


def unrecorded_writes(code, space, cells):
    """[(what, why)] of code's writes past the recorded output, as `module.attribute`
    (sys.__stdout__, os.write, threading.Thread, a pool of threads or processes) or a name
    bound to one (`from os import write`): a compiled call would not write them again, eager
    writes them at each call."""
    named = [(n, a, space.get(n)) for n, a in _attribute_reads(code)] + \
        [(n, a, cells.get(n)) for n, a in _attribute_reads(code, ("LOAD_DEREF",))]
    out = [(f"{name}.{attr}", f"it writes to {why} ({name}.{attr}{_line_of(code, name)})")
           for name, attr, m in named if inspect.ismodule(m)
           for why in [_unrecorded_writer(m, attr)] if why]
    for name, v in [(n, space.get(n)) for n in global_names(code)] + list(cells.items()):
        if any(v is w for w in _FD_WRITES) or _starts_workers(v):
            what = "a file descriptor" if not _starts_workers(v) else "a thread or a process"
            out.append((f"{name}()", f"it writes to {what} ({name}{_line_of(code, name)}), "
                        "which compile does not record"))
    return out


def outside_reads(code, space, cells):
    """[(what, why)] of code's calls of what reads or writes files, directories or the
    environment past the functions a trace watches (external_io.bound_io): one bound to a
    name before the trace (`from os import listdir`), os.getenv, os.getcwd and io.FileIO;
    and its reads
    of standard input (sys.stdin: a stream the caller can replace between calls)."""
    bound = [(n, space.get(n)) for n in global_names(code) if n in space] + list(cells.items())
    out = [(f"{name}()", f"it calls {what} ({name}{_line_of(code, name)}), which reads or "
            "writes outside the program where a compiled call would not")
           for name, v in bound for what in [bound_io(v)] if what]
    named = [(n, a, space.get(n)) for n, a in _attribute_reads(code)] + \
        [(n, a, cells.get(n)) for n, a in _attribute_reads(code, ("LOAD_DEREF",))]
    for name, attr, m in named:
        if not inspect.ismodule(m):
            continue
        what = bound_io(getattr(m, attr, None))
        if m is sys and attr in ("stdin", "__stdin__"):
            what = f"sys.{attr}"
        if what in ("os.getenv", "os.getcwd", "io.FileIO", "sys.stdin", "sys.__stdin__"):
            out.append((f"{name}.{attr}", f"it reads {what} ({name}.{attr}"
                        f"{_line_of(code, name)}), which a compiled call would not read again"))
    return out


def fresh_reads(code, space, cells):
    """[(what, why)] of code's reads of what gives another value at each call (_fresh), as
    a name of its globals or cells or as `module.attribute`, and of open() / input()."""
    out = [(f"{name}()", f"it reads {_what(v)} ({name}{_line_of(code, name)}), which "
            "a compiled call would not read again")
           for name, v in [(n, space.get(n)) for n in global_names(code)] + list(cells.items())
           if _fresh(v, code)]
    out += [(f"{name}()", f"it reads a file or the terminal ({name}(){_line_of(code, name)}), "
             "which a compiled call would not read again")
            for name in global_names(code) if name in _IO_BUILTINS and name not in space]
    named = [(n, a, space.get(n)) for n, a in _attribute_reads(code)] + \
        [(n, a, cells.get(n)) for n, a in _attribute_reads(code, ("LOAD_DEREF",))]
    for name, attr, m in named:
        if inspect.ismodule(m) and _fresh(getattr(m, attr, None), code):
            out.append((f"{name}.{attr}", f"it reads {_what(getattr(m, attr))} ({name}.{attr}"
                        f"{_line_of(code, name)}), which a compiled call would not read again"))
    return out


def _what(v):
    return "the clock" if _clock(v) or v is datetime or (
        inspect.isclass(v) and issubclass(v, datetime.date)) else \
        "a value that changes at each call"


def identity_read(code, space):
    """Why no guard follows what code (with globals space) computes: it calls the builtin
    id(); or None."""
    return next((f"{name}(){_line_of(code, name)} gives an object's identity, which compile "
                 "does not guard" for name in global_names(code)
                 if name in _IDENTITY and name not in space), None)


def _line_of(code, name):
    """' at file.py:line' of code's first read of the name (its nested code's included)."""
    stack = [code]
    while stack:
        c = stack.pop()
        line = None
        for ins in dis.get_instructions(c):
            pos = getattr(ins, "positions", None)       # (3.11+; 3.10: starts_line)
            if pos is not None and pos.lineno is not None:
                line = pos.lineno
            elif type(ins.starts_line) is int:
                line = ins.starts_line
            if ins.argval == name and line is not None and \
                    ins.opname in ("LOAD_GLOBAL", "LOAD_NAME", "LOAD_DEREF"):
                return f" at {os.path.basename(c.co_filename)}:{line}"
        stack.extend(k for k in c.co_consts if inspect.iscode(k))
    return ""
