"""Which of the user's methods a traced run ran: the guard walk follows the functions of the
classes whose objects it enters (guards._walk), so what a method the step never calls
reads (an `__init__` or a logging helper reading a list the program grows between calls)
made every call look new: a trace per call, then eager runs at the recompile limit.

A trace records the methods it runs among the walk's candidates (the user's plain
functions held in the class dicts of the objects the walk entered, whose reads hold
something a call could change: a container, an array, a tensor, an object): each is
replaced in its class, for the traced run only, by a recorder that notes the call and
calls it. A candidate no trace of the compiled function ran is marked (method_marks: in its
dynamic set: the walk no longer follows it, guards.py); the first entry is keyed by a walk
with every candidate skipped (made before the run) when the run ran none of them.

Sound: a marked method that a later traced run does run (its key did not hold what the
method reads) makes that run one not kept (like a Python change it cannot replay), the mark
is dropped for good, and the next call traces again with the method followed. A method
called without going through its class (a bound method kept from before, a function kept
in a list) is reached by the walk through what holds it, which a mark does not skip."""
import inspect
import threading
from contextlib import contextmanager

import numpy as np

from ..runtime.tensor import Tensor
from . import type_reads
from .class_state import user_classes
from .function_reads import followed_reads
from .guards import collect
from .method_marks import KEPT, active as _active, mark, recorded, recorder as _recorder


def _changeable(v):
    return isinstance(v, (list, dict, set, np.ndarray, Tensor)) or (
        hasattr(v, "__dict__") and not (inspect.ismodule(v) or inspect.isclass(v)
                                        or inspect.isroutine(v)))


def _candidates(cf, entered):
    """{function: [(class, name)]} of the entered objects' classes' methods worth a record."""
    own = getattr(cf.fn, "__func__", cf.fn)
    ran = getattr(cf, "_ran_ever", set())
    out, seen = {}, set()
    for o in entered:
        cls = type(o)
        if isinstance(o, (list, tuple, dict)) or inspect.isclass(o) or cls in seen:
            continue
        seen.add(cls)
        for c in user_classes(cls):
            for name, f in vars(c).items():
                f = recorded(f)     # (another thread's trace records it now)
                if not inspect.isfunction(f) or f is own or name in KEPT:   # (KEPT: followed)
                    continue
                if f in out:        # (the same function under another name: both recorded)
                    out[f].append((c, name))
                elif mark(f) in cf._dynamic or id(f) not in ran and any(   # (marked: always)
                        kind in ("cell", "global", "module") and _changeable(v)
                        for _, kind, _, v in followed_reads(f)):
                    out[f] = [(c, name)]
    return out


class Plan:
    """What one trace records, and the key its entry is kept under."""

    def __init__(self, cf, watched, fresh, least_key):
        self.cf, self.watched, self.fresh, self.least_key = cf, watched, fresh, least_key
        self.ran = set()

    def unsound(self):
        """After the traced run: why its key does not hold what it read (it ran a marked
        method: the mark is dropped), else None; notes the methods it ran."""
        cf = self.cf
        ever = cf.__dict__.setdefault("_ran_ever", set())
        ever.update(id(f) for f in self.ran)
        cf.__dict__.setdefault("_ran_kept", []).extend(self.ran)    # (ids stay theirs)
        gone = {mark(f) for f in self.ran} & cf._dynamic
        if not gone:
            return None
        cf._dynamic = cf._dynamic - gone
        cf._fast.clear()
        cf._walkers = []
        return "a method its guards did not follow (run by no earlier trace)"

    def key(self, key):
        """The key the entry is kept under: the walk's without the methods it did not run,
        where that walk was made and the run ran none of them (they are marked from now
        on); else the full walk's, nothing marked (marked, the next call's walk would not
        give this key: a trace more, where a skipped method reads a tensor the entry takes
        as an input, a module's __init__ reading the dictionary it copies)."""
        fresh = [f for f in self.fresh if f not in self.ran]
        if not fresh or self.least_key is None or len(fresh) != len(self.fresh):
            return key
        cf = self.cf
        cf._dynamic = cf._dynamic | {mark(f) for f in fresh}
        cf.__dict__.setdefault("_ran_kept", []).extend(fresh)
        cf._fast.clear()
        cf._walkers = []        # (made again: the walkers skip the marked methods too)
        return self.least_key


@contextmanager
def recording(cf, entered, args, kwargs, tensors):
    """Around a trace: the Plan of the candidates' record (None when there are none)."""
    watched = _candidates(cf, entered)
    fresh = [f for f in watched if mark(f) not in cf._dynamic]
    # (and the methods naming type() that type_reads.py leaves out: recorded, checked)
    readers = type_reads.readers(cf, entered)
    swapped = {**readers, **watched}
    if not watched:
        with _recorders(swapped, set(), cf, readers):
            yield None
        return
    least = None
    if fresh:       # (the walk with them skipped, on the state before the run)
        t2, g2, _ = collect(cf.fn, args, kwargs, None,
                            cf._dynamic | {mark(f) for f in fresh})
        if [p for p, _ in t2] == [p for p, _ in tensors]:
            least = tuple(v for _, v in g2)
    plan = Plan(cf, watched, fresh, least)
    with _recorders(swapped, plan.ran, cf, readers):
        yield plan


@contextmanager
def _recorders(swapped, ran, cf, readers):
    """Each function of swapped ({function: [(class, name)]}) replaced by its recorder in
    those classes while the block runs, noting the calls in ran."""
    if not swapped:
        yield
        return
    with _lock:
        _active.append(ran)
        for f, places in swapped.items():
            for c, name in places:
                try:
                    _swap(c, name, f)
                except Exception:       # (a class that refuses: taken as run)
                    ran.add(f)
                    if f in readers:    # (and as one reading types: unchecked)
                        cf._static = cf._static | {type_reads.TYPES_READ}
    try:
        yield
    finally:
        with _lock:
            _active.remove(ran)
            for f, places in swapped.items():
                for c, name in places:
                    _unswap(c, name, f)


# the recorders in the classes now: {(class id, name): [recorder, how many traces use it]},
# each noting its call in the record of every trace under way (_active), of any thread
_lock = threading.Lock()
_swapped = {}


def _swap(c, name, f):
    held = _swapped.get((id(c), name))
    if held is None:
        r = _recorder(f, type_reads.check if type_reads.names_types(f) else None)
        setattr(c, name, r)
        _swapped[id(c), name] = [r, 1]
    else:
        held[1] += 1


def _unswap(c, name, f):
    held = _swapped.get((id(c), name))
    if held is None:
        return
    held[1] -= 1
    if not held[1]:
        del _swapped[id(c), name]
        if vars(c).get(name) is held[0]:    # (else the user's code replaced it meanwhile)
            setattr(c, name, f)
