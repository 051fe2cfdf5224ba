"""What a traced run changed outside its tensors, found by comparing the guard walker's
view of the call's Python state before and after it (a compiled call replays tensor
effects, and the tensors it puts into objects it reaches (attr_writes.py): a run that
changed anything else must not be kept as an entry)."""
import array
import collections
import contextlib
import contextvars
import ctypes
import inspect
import mmap

from ..tracer.errors import TraceError
from .class_state import LIBRARIES, Same
from .code_reads import identity_read, users_file, users_module
from .guard_pairs import GONE, paired_items
from .guards import collect, identity
from .guard_expressions import Names
from .input_reshapes import reshapes_taken_back
from .readable import differences
from .replayed_output import recording
from .snapshot import StateSnapshot


def unreplayed_change(fn, args, kwargs, guards, tensors, entry, dynamic=frozenset()):
    """What the traced run of fn(*args, **kwargs) changed that entry does not replay, as
    text (Python where it can say it), or None. guards: the call's guard items before the
    run; tensors: its own tensor inputs [(path, tensor)] before the run; dynamic: as
    collect's."""
    after_tensors, after, after_own = collect(fn, args, kwargs, dynamic=dynamic)
    after = _grad_switched_on(entry, guards, after, tensors)
    after = reshapes_taken_back(entry, guards, after, tensors)     # (x.unsqueeze_(0))
    written, entry.written = entry.written, ()
    changed = python_changes(guards, after, written) or tensor_changes(
        tensors, after_tensors[:after_own], written)
    if changed:
        changed = readable_change(fn, args, kwargs, guards, after) or changed
    return changed


def python_changes(before, after, written=()):
    """The first guard item (other than a tensor's .grad, which an entry sets itself, and
    the slots it writes: written) that a traced run changed, as text; None if it changed
    none."""
    if len(before) == len(after) and all(a is b or a == b for a, b in zip(before, after)):
        return None
    for name, value, now in paired_items(before, after):
        if name.endswith(".grad") or name == "grad mode" or name in written:
            continue
        now = "(gone)" if now is GONE else now
        if not (now is value or now == value or _only_written(name, value, now, written)):
            return f"{name} ({_short(value)} -> {_short(now)})"
    names = {n for n, _ in before}
    new = [n for n, _ in after if n not in names and not n.endswith(".grad")
           and n not in written]
    return f"{new[0]} (made by the call)" if new else None


def _only_written(name, value, now, written):
    """Whether item name is the names read of a narrowed object (guards._walk) that the run
    changed only by the attributes the entry writes (`env.last = y`, made by the call)."""
    path = name.removeprefix("attributes read of ")
    return path != name and type(value) is tuple and type(now) is tuple and \
        all(f"{path}_{k}" in written for k in set(value) ^ set(now))


def _grad_switched_on(entry, before, after, tensors):
    """The guard items after the run with `x.requires_grad = True` (or False) on a leaf
    input x (the FGSM tutorial's `data.requires_grad = True`) or `x.detach_()` on an input
    with a history (d2l's `state.detach_()` between minibatches) taken back, as the entry
    replays it: (position, flag) of those inputs go to entry.grad_on (flag None: detach_).
    The items of the other paths to such an input (a parameter met again in the optimiser's
    param_groups and state keys: their item names its first path) are taken back alike."""
    was, at = dict(before), {path: k for k, (path, _) in enumerate(tensors)}
    out, entry.grad_on, flipped = [], [], {}
    for name, v in after:
        b = was.get(name)
        if type(b) is tuple and type(v) is tuple and len(v) == 7 and v[4] in at and \
                b[3] is (not v[3]) and b[:3] == v[:3] and b[4] == v[4] and b[6] is v[6]:
            if b[5] == v[5]:
                flipped[v[4]] = v[3]
            elif b[3] and not b[5]:     # `x.detach_()` on an input with a history (None)
                flipped[v[4]] = None
    entry.grad_on = [(at[first], flag) for first, flag in flipped.items()]
    for name, v in after:
        b = was.get(name)
        if type(v) is tuple and len(v) == 7 and v[4] in flipped and type(b) is tuple and \
                b[3] is (not v[3]) and (b[5] == v[5] or flipped[v[4]] is None):
            v = b
        out.append((name, v))
    return out


def readable_change(fn, args, kwargs, before, after):
    """python_changes' first change as Python (`len(opt.state) == 0 (now 4)`), or None."""
    try:
        keep = [(n, v) for n, v in before if not n.endswith(".grad") and n != "grad mode"]
        new = [(n, v) for n, v in after if not n.endswith(".grad") and n != "grad mode"]
        diffs = differences(keep, new, Names(fn, args, kwargs))
        return diffs[0][0] if diffs else None
    except Exception:           # (a message: the raw one stands)
        return None


def tensor_changes(before, after, written=()):
    """The first place where the traced run put another tensor, other than the places the
    entry puts its own there (written: their guard paths), as text; None if it put none."""
    now = {path: identity(t) for path, t in after}
    for path, t in before:
        if now.get(path) != identity(t) and path not in written:
            return f"{path} (another tensor)"
    return None


def _short(v):
    text = repr(v)
    return text if len(text) < 60 else text[:57] + "..."


def fresh_optimizer(entered):
    """The state dicts of the optimisers (objects with param_groups and a state dict) a call
    reaches whose state is empty: a first step will fill one, a change a traced run of the
    call could not be kept with (unreplayed_change). ([] if none.) So is one (its state
    loaded or made elsewhere) whose step a scheduler wraps that has not run yet: its first
    run sets `_opt_called` (lr_scheduler's), a new attribute that the next call's guard walk
    sees, so a trace of that first call served no later one (it traced again)."""
    return [d["state"] for d in map(_own_attributes, entered)
            if isinstance(d.get("param_groups"), list) and isinstance(d.get("state"), dict)
            and d["param_groups"] and (not d["state"] or _step_unnoted(d))]


def _step_unnoted(d):
    """Whether an optimiser's own attributes d hold a step a scheduler wrapped (lr_scheduler.
    base._track_step_called) that has not yet set _opt_called."""
    return getattr(d.get("step"), "_wrapped_by_lr_sched", False) and "_opt_called" not in d


def _own_attributes(o):
    """o's __dict__ (a user's __getattr__ that raises KeyError is never called), or {}."""
    if isinstance(o, (list, tuple, dict)):
        return {}
    try:
        return vars(o)
    except Exception:   # noqa: BLE001 (no __dict__, or a __getattr__ that raises)
        return {}


# containers the guard walk does not enter (guarded by identity): what they hold (a tensor, a
# count appended to a deque inside, a number in an array.array or a bytearray that
# frombuffer reads) could change unseen; so could what a ContextVar's get() gives, a ctypes
# value, an mmap's bytes, a database's rows (read-only views of a dict the walk enters:
# guards.py; a StringIO: snapshot.py)
try:
    import sqlite3
    _DATABASES = (sqlite3.Connection, sqlite3.Cursor)
except ImportError:     # (a Python built without it)
    _DATABASES = ()
_UNWALKED = (collections.deque, set, frozenset, array.array, bytearray, memoryview,
             contextvars.ContextVar, ctypes._SimpleCData, ctypes.Array, ctypes.Structure,
             ctypes.Union, mmap.mmap, *_DATABASES)


def unguardable(guards):
    """Why a call runs eagerly before any trace, or None: it reaches an iterator (a
    generator, iter(list), a file), whose consumption by next() or a loop no guard sees
    and no snapshot puts back, or fn reads what no guard follows (code_reads.py)."""
    for path, v in guards:
        if type(v) is tuple and len(v) == 3 and v[0] == "object" and type(v[2]) is Same \
                and hasattr(type(v[2].v), "__next__"):
            return f"the call reaches an iterator, {path} ({v[1]}), whose consumption a " \
                "compiled call cannot replay"
        if type(v) is tuple and len(v) == 3 and v[0] == "object" and type(v[2]) is Same \
                and isinstance(v[2].v, _UNWALKED) or type(v) is tuple and len(v) == 2 and \
                v[0] == "object" and isinstance(v[1], type) and issubclass(v[1], _UNWALKED):
            # (the second: entered through a __dict__ that holds none of it: a ctypes value)
            what = v[1] if len(v) == 3 else v[1].__name__
            return f"the call reaches a {what}, {path}, whose contents a compiled call " \
                "neither guards nor replays writes to (use a list)"
        if type(v) is tuple and len(v) == 3 and v[0] == "object" and type(v[2]) is Same \
                and _users_module(v[2].v):
            return f"the call reaches one of the user's modules, {path}, as a value " \
                "(an argument, an attribute): compile does not guard what is read from it"
        if type(v) is tuple and len(v) == 2 and v[0] == "unguarded":
            return v[1]
        why = _identity_read(v)
        if why is not None:
            return why
    return None


def _users_module(v):
    """Whether v is a module from the user's files (a config module's settings change
    between calls; one read as a global or a closure name is walked: code_reads.py)."""
    return inspect.ismodule(v) and users_module(v)


def _identity_read(v):
    """Why no guard follows what a function the walk met computes (it calls id()): one of
    the user's functions guarded by identity, or a method of a user's class (guard items
    of class_state), else None."""
    fs = ()
    if type(v) is tuple and len(v) == 3 and v[0] == "object" and type(v[2]) is Same:
        fs = (v[2].v,)
    elif type(v) is tuple and v and all(type(c) is tuple and len(c) == 2 and
                                        isinstance(c[0], type) for c in v):
        fs = [x.v for _, items in v for _, x in items if type(x) is Same]
    for f in fs:
        f = getattr(f, "__func__", f)       # (static and class methods, bound methods)
        if isinstance(f, property):
            f = f.fget
        if inspect.isfunction(f) and users_file(f.__code__.co_filename) and \
                not (f.__module__ or "").startswith(LIBRARIES):     # (the user's own code)
            why = identity_read(f.__code__, f.__globals__)
            if why is not None:
                return why
    return None


@contextlib.contextmanager
def none_in_differentiation(entered):
    """Around the traced differentiation of a function's results, which runs what eager
    runs only at the caller's backward (a custom autograd.Function's backward): Python
    effects of it (a count of calls in a list, a global or its class, a print, a warning)
    would be given once by the trace, at the call, and never by compiled calls, so they
    are put back and the call runs eagerly. entered: what the guard walk entered."""
    snapshot, given = StateSnapshot([], entered), []
    with recording(given):
        yield
    # (NumPy's floating-point RuntimeWarnings from llgrad's own kernels, log(0) in the
    # backward of a fully masked logsumexp, are none of the function's: PyTorch is silent)
    given = [g for g in given if not _numpy_noise(g)]
    changed = snapshot.changed() or ("what it prints or warns" if given else None)
    if changed:
        snapshot.restore()
        raise TraceError(f"the backward of the function's results (a custom "
                         f"autograd.Function's backward) changes {changed}, which compiled "
                         "calls cannot give")


def _numpy_noise(item):
    """Whether a recorded warning is a RuntimeWarning raised inside llgrad itself (NumPy's
    divide-by-zero or invalid-value note on an example value)."""
    return item[0] in ("warn", "once") and issubclass(item[2], RuntimeWarning) and \
        str(item[5]).startswith("llgrad.")
