"""A bound method's object walked through the attributes its method reads.

A trainer's step is often a method: `def step(self, x, y)` reading self.model and self.opt,
the object also holding what the step never reads: the pre-made batches it is called with
(`for x, y in self.batches: step(x, y)`), the epoch counter, the tensors the last call left
in self.loss. The guard walk (guards.collect, guard_walker.make_walker) entered every
attribute, so each batch (an argument that is also an element of self.batches: which one
is part of the key), each epoch and each flip of the last loss's requires_grad traced again,
until the recompile limit ran the step eagerly.

When the method's own code uses `self` only as `self.name` (loaded, or stored to) and each
name it loads is the object's own attribute or a method of its class that does the same
(followed: what it reads is read; a property, class value, static or class method may read
anything), the walks enter the object through those names alone. A name
stored in the method's straight-line start, before any jump and before the method loads it,
is not read from the call's state (self.loss = ...; then self.loss.backward()): it is left
out. Kept to what the bytecode shows for certain: a plain function (no decorator's wrapper
but a grad-mode one's, `@torch.no_grad()`: the function it wraps followed),
`self` not captured by a nested function or rebound, no name that reaches frames, an object
of a class without __getattr__, __getattribute__ or __setattr__ of its own (nn.Module has
them: a module's method keeps the full walk). The object met again inside the walk (a
back-reference) makes the walk a full one (guards.collect, guard_walker)."""
import dis
import functools
import inspect

from ..runtime import grad_mode

_FRAME_NAMES = frozenset(("locals", "vars", "eval", "exec", "globals", "_getframe",
                          "currentframe", "stack", "f_locals", "getframeinfo", "super",
                          "__dict__", "__class__"))
_LOADS = ("LOAD_ATTR", "LOAD_METHOD")


class Reentered(Exception):
    """The narrowed object was met again in the walk: walk it whole."""


@functools.lru_cache(maxsize=1024)
def _uses(code):
    """(names loaded from self, names stored first in the straight-line start) of code,
    or None where self is used any other way."""
    if code.co_argcount < 1 or _FRAME_NAMES & set(code.co_names):
        return None
    name = code.co_varnames[0]
    if name in code.co_cellvars:
        return None
    ins = list(dis.get_instructions(code))
    # (a handler may read what its try body did not get to store: none taken as stored)
    loads, stored_first, straight = {}, set(), not getattr(code, "co_exceptiontable", b"")
    for i, x in enumerate(ins):
        if x.is_jump_target or "JUMP" in x.opname or x.opname.startswith(("FOR_ITER", "SETUP")):
            straight = False        # (past the straight-line start)
        if x.argval != name:
            if type(x.argval) is tuple and name in x.argval:
                return None
            continue
        if x.opname != "LOAD_FAST" or i + 1 >= len(ins):
            return None
        nxt = ins[i + 1]
        if nxt.opname == "COPY" and i + 2 < len(ins) and ins[i + 2].opname in _LOADS:
            nxt = ins[i + 2]        # (self.n += 1: the object copied, n loaded, then stored)
        if nxt.opname in _LOADS:
            if nxt.argval not in stored_first:
                loads.setdefault(nxt.argval, None)
        elif nxt.opname == "STORE_ATTR":
            if straight and nxt.argval not in loads:
                stored_first.add(nxt.argval)
        else:
            return None
    return tuple(loads)


def _plain_class(cls):
    return (cls.__getattribute__ is object.__getattribute__ and cls.__setattr__ is
            object.__setattr__ and getattr(cls, "__getattr__", None) is None and
            "__slots__" not in dir(cls))


def _reads(owner, code, seen):
    """{name: None} of what code reads of owner, the methods of owner's class it calls as
    `self.method(...)` followed (their reads counted where the call is: a stored-first name
    stays out only where the caller stored it before), or None for the whole object."""
    names = _uses(code)
    if names is None:
        return None
    out = {}
    for n in names:
        out[n] = None       # (a method's name too: an instance attribute shadowing it later
        if n in vars(owner):                          # changes the walk's key)
            continue
        attr = _unwrapped(inspect.getattr_static(type(owner), n, _MISSING))
        if attr is _MISSING:
            continue
        if not inspect.isfunction(attr) or hasattr(attr, "__wrapped__"):
            return None     # (a property, class value, static or class method, a wrapper)
        if attr.__code__ not in seen:
            seen.add(attr.__code__)
            more = _reads(owner, attr.__code__, seen)
            if more is None:
                return None
            out.update(more)
    return out


_MISSING = object()
_MODE_WRAPPER = grad_mode.no_grad()(lambda: None).__code__     # (every grad-mode decorator's)


def _unwrapped(f):
    """f, or the function a grad-mode decorator (`@torch.no_grad()` on a method) wraps: its
    wrapper passes its arguments on, reading nothing else."""
    while inspect.isfunction(f) and f.__code__ is _MODE_WRAPPER:
        f = f.__closure__[f.__code__.co_freevars.index("fn")].cell_contents
    return f


def read_names(fn):
    """The attribute names of a bound method's object its walks enter (see the module), or
    None for the whole object."""
    if not inspect.ismethod(fn):
        return None
    f, owner = _unwrapped(fn.__func__), fn.__self__
    if not inspect.isfunction(f) or hasattr(f, "__wrapped__") or \
            not hasattr(owner, "__dict__") or not _plain_class(type(owner)):
        return None
    names = _reads(owner, f.__code__, {f.__code__})
    return None if names is None else frozenset(names)
