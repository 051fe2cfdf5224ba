"""What a call can change, saved before a trace and put back when the trace cannot become
compiled code (a graph break) or must not leave a trace of itself (a dump).

A trace is an eager run of the user's function: by the time the tracer finds something it
cannot record, the function may already have written its inputs, set `.grad`, stepped an
optimiser or drawn random numbers. Putting all of that back and then running the function
eagerly gives exactly eager's behaviour (the call runs once, as far as anyone can see).

Saved: every tensor the guard walk reached (the bytes of its storage, its version, its
autograd fields), every object's attributes and every list's and dict's items the walk
entered, and the random generators (llgrad's, NumPy's global one, Python's)."""
import contextlib
import io
import random

import numpy as np

from ..runtime.creation import _Generator, default_generator
from ..tracer.errors import ControlFlowError, TraceError
from . import external_io
from .class_state import slotted
from .function_reads import captured_reads
from .py_draws import explains
from .settings import changed_setting, restore_settings, saved_settings

_GONE = object()
_TENSOR_FIELDS = ("_data", "_storage", "_dtype", "_requires_grad", "_grad", "_grad_fn",
                  "_output_nr", "_base", "_view_version", "_retains_grad", "_hooks", "_acc")


class StateSnapshot:
    def __init__(self, tensors, containers, names=(), fn=None):
        """tensors: [Tensor]; containers: objects, lists and dicts the guard walk entered;
        names: the closure cells and global names the call reads or binds, as
        attr_writes.Slots.names, and those fn reads (`config.calls += 1` too): rebound by a
        trace that breaks, put back, or the eager run after it starts from the trace's."""
        self.names = [(where, bound(where)) for where, *_ in [*names, *(captured_reads(fn)[1]
                      if fn is not None else ())] if where[0] in ("cell", "global")]
        # (with the bases of views: a write through a view gives its base a new grad_fn)
        seen = {id(t) for t in tensors}
        bases = [t._base for t in tensors if t._base is not None and id(t._base) not in seen
                 and not seen.add(id(t._base))]
        self.tensors = [(t, tuple(getattr(t, f) for f in _TENSOR_FIELDS),
                         dict(t.__dict__) if t.__dict__ else None) for t in [*tensors, *bases]]
        storages = {}
        for t in tensors:
            st = t._storage
            if id(st) not in storages:
                storages[id(st)] = (st, st.version, np.array(st.base, copy=True))
        self.storages = list(storages.values())
        self.containers, self.others, self.files = [], [], []
        self.generators = []        # the user's own generators the walk met, and their states
        for c in _with_nested(containers):
            if isinstance(c, _GENERATORS):
                if c is not default_generator:      # (saved below; its traced draws are ops)
                    self.generators.append((c, _state(c)))
                if not hasattr(c, "__dict__") or isinstance(c, _Generator):
                    continue
            if isinstance(c, io.IOBase):     # (a StringIO, a file: its position and text)
                self.files.append((c, _file_state(c)))
            if isinstance(c, list):
                self.containers.append((c, list(c)))
            elif isinstance(c, dict):
                self.containers.append((c, dict(c)))
            else:
                self.containers.append((c, dict(vars(c))))
        # sets (of scalars: the guard walk guards them by value) and objects of the user's
        # with __slots__ that the containers, the objects and the names hold
        seen = set()
        for v in [b for _, b in self.names] + [x for _, items in self.containers for x in (
                items if isinstance(items, list) else items.values())]:
            if (type(v) is set or slotted(v)) and id(v) not in seen and not seen.add(id(v)):
                self.others.append((v, _held(v)))
        self.rng = _state(default_generator)
        self.np_state = np.random.get_state()
        self.py_state = random.getstate()
        self.settings = saved_settings()     # (with nn's and optim's global hooks)

    def changed(self, settles=None):
        """What the run changed since the snapshot (an input's data or autograd fields, a
        container's items, an object's attributes but those settles(old or None, new) takes
        as no change), as text; None if nothing."""
        for st, version, data in self.storages:
            if st.version != version or st.base.tobytes() != data.tobytes():
                return "a tensor's data"
        for t, fields, _ in self.tensors:
            if any(getattr(t, f) is not v for f, v in zip(_TENSOR_FIELDS, fields)):
                return "a tensor's autograd state"
        for c, items in self.containers:
            now = c if isinstance(c, (list, dict)) else vars(c)
            if len(now) != len(items) or any(
                    a is not b for a, b in zip(now, items) if isinstance(now, list)) or \
                    (not isinstance(now, list) and any(
                        k not in items or items[k] is not v for k, v in now.items())):
                if not (settles and now is not c and items.keys() <= now.keys() and all(
                        settles(items.get(k), v) for k, v in now.items() if items.get(k) is not v)):
                    return f"a {type(c).__name__}'s contents"
        for c, items in self.others:
            if _held(c) != items:
                return f"a {type(c).__name__}'s contents"
        for c, state in self.files:
            if _file_state(c) != state:
                return f"what a {type(c).__name__} holds"
        return None

    def foreign_random(self, entry=None):
        """Which generator other than llgrad's the run drew from since the snapshot (its
        draws would be constants of a trace; not entry's draws, py_draws.py), or None."""
        now = np.random.get_state()
        if (now[2:] != self.np_state[2:] or not np.array_equal(now[1], self.np_state[1])) \
                and not explains(entry, self.py_state, self.np_state):
            return "NumPy's global random generator (np.random)"
        if random.getstate() != self.py_state and not explains(entry, self.py_state):
            return "Python's random module"
        for g, state in self.generators:
            if not _same_state(_state(g), state):
                if isinstance(g, _Generator):
                    return "an llgrad.Generator object (generator=...)"
                where = "numpy.random" if isinstance(g, _GENERATORS[1:]) else "random"
                return f"a {where}.{type(g).__name__} object"
        return None

    def unreplayed_effect(self, entry=None):
        """Why the run (traced, so eager's) must stay the only kind a call gets, or None: it
        read or wrote a file through a library (entry's external_io.py notes), drew from a
        generator other than llgrad's (a trace makes its draws constants), or changed one of
        llgrad's global settings (a compiled call would not)."""
        io_reason = external_io.reason(entry.external_io) if entry is not None else None
        if io_reason is not None:
            return io_reason
        # (a write to a file object the call reaches, which no compiled call would make)
        used = next((c for c, state in self.files if _file_state(c) != state), None)
        if used is not None:
            return f"the function writes to (or reads) a {type(used).__name__} object, " \
                "which a compiled call cannot replay"
        # (an OS file open for reading that the function reaches: a read after seek(0)
        # leaves its position as it was, and no guard follows what the file holds)
        held = next((c for c, _ in self.files if _readable_os_file(c)), None)
        if held is not None:
            return f"the function reaches a file open for reading ({getattr(held, 'name', '?')})" \
                ", whose contents a compiled call would not read again"
        # (a StringIO or BytesIO: its getvalue() moves no position, and no guard follows it)
        held = next((c for c, _ in self.files if isinstance(c, (io.StringIO, io.BytesIO))), None)
        if held is not None:
            return f"the function reaches a {type(held).__name__}, whose text a compiled call " \
                "would not read again"
        foreign = self.foreign_random(entry)
        if foreign is not None:
            return f"the function draws from {foreign}, which a compiled call cannot " \
                "replay (use llgrad's default generator)"
        setting = changed_setting(self.settings[0])
        if setting is not None:
            return f"the function changes llgrad's {setting} (a global setting), which a " \
                "compiled call would not change"
        return None

    def bumps(self, tensors, entry):
        """{input position: how many times the traced run bumped its version} for the
        inputs entry writes back (eager's count: x.add_(1); x.mul_(2) makes two; a write
        through x.data, none: .data has a counter of its own; x.unsqueeze_(0) makes one),
        where that is not one."""
        before = {id(st): version for st, version, _ in self.storages}
        out = {}
        for i in {*entry.forward.mutated, *(r[0] for r in entry.input_reshapes)}:
            if i < len(tensors) and i != entry.rng_index:
                st = tensors[i]._storage
                n = st.version - before.get(id(st), st.version)
                if n != 1:
                    out[i] = n
        return out

    def restore(self):
        for st, version, data in self.storages:
            # (every write bumps the version, a read-only base's too, except one through
            # `.data`, which has a counter of its own: its bytes tell)
            if st.version != version or st.base.tobytes() != data.tobytes():
                st.base[...] = data
                st.version = version
        for t, fields, attrs in self.tensors:
            for f, v in zip(_TENSOR_FIELDS, fields):
                setattr(t, f, v)
            if attrs is not None or t.__dict__:
                t.__dict__.clear()
                t.__dict__.update(attrs or {})
        for c, items in self.containers:
            if isinstance(c, list):
                if not _same_items(c, items):
                    c[:] = items
            elif isinstance(c, type):       # (a class of the user's: no clear() on its dict)
                for k in [k for k in vars(c) if k not in items]:
                    delattr(c, k)
                for k, v in items.items():
                    if vars(c).get(k, _GONE) is not v:
                        setattr(c, k, v)
            else:
                # (a dict left as it was is not touched: refilling it would break an
                # iteration over it in progress, `for p in m.parameters():` around a tensor
                # `if` whose untaken branch was traced: an OrderedDict's iterator raises)
                d = c if isinstance(c, dict) else vars(c)
                if not _same_items(d, items):
                    d.clear()
                    d.update(items)
        for c, state in self.files:
            if state is not None and _file_state(c) != state:
                if state[1] is not None:    # (a StringIO's or BytesIO's text: put back)
                    c.seek(0)
                    c.truncate()
                    c.write(state[1])
                c.seek(state[0])
        for c, items in self.others:
            if isinstance(c, set):
                c.clear()
                c.update(items)
                continue
            for k, v in ((k, w.v) for k, w in items.items()):
                if v is _GONE:
                    if hasattr(c, k):
                        delattr(c, k)
                elif getattr(c, k, _GONE) is not v:
                    setattr(c, k, v)
        for where, before in self.names:
            put_back(where, before)
        _set_state(default_generator, self.rng)
        np.random.set_state(self.np_state)
        random.setstate(self.py_state)
        for g, state in self.generators:
            _set_state(g, state)
        restore_settings(self.settings)     # (`set_grad_enabled(False)` left by the run)


def _same_items(now, items):
    """Whether list or dict `now` holds exactly `items` (the same objects, in order)."""
    if len(now) != len(items):
        return False
    if isinstance(now, list):
        return all(a is b for a, b in zip(now, items))
    return all(k is j and v is w for (k, v), (j, w) in zip(now.items(), items.items()))


def _held(o):
    """A set's items (a copy), or a slotted object's attributes as {name: value or _GONE}
    (compared by identity: _Is)."""
    if isinstance(o, set):
        return set(o)
    names = [n for c in type(o).__mro__ for n in (
        (vars(c)["__slots__"],) if isinstance(vars(c).get("__slots__"), str)
        else vars(c).get("__slots__", ())) if n != "__weakref__"]
    return {n: _Is(getattr(o, n, _GONE)) for n in names}


class _Is:
    """A value compared by identity (a slot holding a tensor: == would compare values)."""
    __slots__ = ("v",)

    def __init__(self, v):
        self.v = v

    def __eq__(self, other):
        return self.v is other.v


def _file_state(f):
    """A file object's position and, for a StringIO or BytesIO, its text; None where
    neither can be read (closed, a pipe)."""
    try:
        return f.tell(), f.getvalue() if isinstance(f, (io.StringIO, io.BytesIO)) else None
    except (OSError, ValueError):
        return None


def bound(where):
    """What a closure cell or a global name (where: ("cell", cell) or ("global", globals,
    name)) holds now, or _GONE."""
    if where[0] == "cell":
        try:
            return where[1].cell_contents
        except ValueError:
            return _GONE
    return where[1].get(where[2], _GONE)


def put_back(where, before):
    """Bind a closure cell or a global name to what it held before (or unbind it)."""
    if bound(where) is before:
        return
    if where[0] == "cell":
        if before is _GONE:
            del where[1].cell_contents
        else:
            where[1].cell_contents = before
    elif before is _GONE:
        where[1].pop(where[2], None)
    else:
        where[1][where[2]] = before


_GENERATORS = (random.Random, np.random.Generator, np.random.RandomState, _Generator)


def _state(g):
    if isinstance(g, _Generator):       # (its attributes: setting them is no reseed)
        return g._seed, None if g._state is None else g._state.copy()
    if isinstance(g, random.Random):
        return g.getstate()
    if isinstance(g, np.random.Generator):
        return g.bit_generator.state
    return g.get_state(legacy=False)


def _set_state(g, state):
    if isinstance(g, _Generator):
        g._seed, g._state = state[0], None if state[1] is None else state[1].copy()
    elif isinstance(g, random.Random):
        g.setstate(state)
    elif isinstance(g, np.random.Generator):
        g.bit_generator.state = state
    else:
        g.set_state(state)


def _same_state(a, b):
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same_state(a[k], b[k]) for k in a)
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and np.array_equal(a, b)
    if isinstance(a, tuple):
        return len(a) == len(b) and all(_same_state(x, y) for x, y in zip(a, b))
    return a == b


def _readable_os_file(c):
    """Whether c is an open file of the OS's (not a StringIO, not a terminal) it can read."""
    try:
        return isinstance(c, (io.FileIO, io.BufferedReader, io.BufferedRandom,
                              io.TextIOWrapper)) and not c.closed and c.readable() and \
            not c.isatty()
    except (ValueError, OSError):       # (a detached wrapper)
        return False


def _with_nested(containers):
    """The containers and every list and dict nested in them (pytree.flatten enters nested
    ones without the walk naming them), each once."""
    out, seen, stack = [], set(), list(containers)
    while stack:
        c = stack.pop()
        if id(c) in seen:
            continue
        seen.add(id(c))
        out.append(c)
        items = c if isinstance(c, (list, tuple)) else c.values() if isinstance(c, dict) else ()
        stack.extend(x for x in items if isinstance(x, (list, tuple, dict)))
    return [c for c in out if not isinstance(c, tuple)]


@contextlib.contextmanager
def untaken_branch(tensors, entered, what, part="the branch eager does not take",
                   taken=False, fn=None, settles=None):
    """Tracing code whose Python effects are not eager's (part: the branch of a tensor `if`
    that eager does not take, a loop body traced once that eager runs once per iteration):
    what it does in Python is put back; code that raises or changes Python state (which a
    compiled call would not do, or do as often) makes the function traced as plain Python
    instead.

    taken: the branch eager takes. Its Python effects are this call's, but a compiled call
    would repeat them whichever branch its condition picks, so one that changes Python state
    (an object's attributes, a container's items: `model.eval()` under `if x.sum() > 0:`)
    makes the function traced as plain Python too (its condition a value guard); its tensor
    writes are the branch's graph, not Python state. fn: the function the code runs, whose
    global names and closure cells (and its helpers') are watched too (`global n; n += 1`)
    and put back. settles: StateSnapshot.changed's, for the branch eager takes."""
    names = [] if fn is None else [(w, bound(w), path) for w, _, _, path in
                                   captured_reads(fn)[1] if w[0] in ("cell", "global")]
    if taken:
        watched = StateSnapshot([], entered)
        yield
        changed = watched.changed(settles) or _rebound(names)
        if changed is not None:
            raise ControlFlowError(f"{what}: the branch eager takes changes {changed}")
        return
    snapshot = StateSnapshot(tensors, entered, names)
    try:
        yield
    except TraceError:
        snapshot.restore()
        raise
    except Exception as e:
        snapshot.restore()
        raise ControlFlowError(f"{what}: {part} raises {type(e).__name__}: {e}") from e
    changed = snapshot.changed() or _rebound(names)
    snapshot.restore()
    if changed is not None:
        raise ControlFlowError(f"{what}: {part} changes {changed}")


def _rebound(names):
    """What names [(where, value before, path)] one rebinds now, as text; None if none."""
    return next((f"what {path} names" for w, v, path in names if bound(w) is not v), None)
