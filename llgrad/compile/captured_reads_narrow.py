"""Objects a compiled function reaches through a global name or a closure cell, walked
through the attributes its code reads or writes.

A step that calls `env.scale()` on a global harness object used to have every attribute of
that object guarded (guards.collect, guard_walker): a list the harness appends to between
calls (`env.records`), which the step never reads, changed the key, so each call traced
again until the recompile limit ran the step eagerly. As for a method's `self`
(self_reads.py), when each function that reads the global name or cell uses it only as
`name.attr` (loaded, called as a method, or stored to) and each such name is the object's
own attribute or a plain method of its class that uses its `self` alike (followed), the
walks enter the object through those names alone. Written names are entered too: the run's
changes to them are what side_effects.py compares. Anything else keeps the whole object:
the name passed on, rebound or reached through frames (getattr(env, "x"), vars(env)), a
property, class value, static or class method, a wrapper, a class with __getattr__,
__getattribute__ or __setattr__ of its own (an nn.Module: its forward reads anything),
__slots__, a function held as an instance attribute (it may reach the object otherwise).
The object met again in a walk other than as such a root: walked whole."""
import dis
import functools
import inspect

from .class_state import LIBRARIES
from .self_reads import _FRAME_NAMES, _MISSING, _plain_class, _unwrapped

_REFS = {"global": ("LOAD_GLOBAL", "LOAD_NAME"), "cell": ("LOAD_DEREF", "LOAD_CLASSDEREF")}
_ATTRS = ("LOAD_ATTR", "LOAD_METHOD", "STORE_ATTR")


@functools.lru_cache(maxsize=1024)
def attribute_uses(code, refs, name):
    """The attribute names code (its nested code included) reads or writes as `name.attr`,
    name loaded by one of the instructions refs; None where name is used any other way."""
    out, todo = {}, [code]
    while todo:
        c = todo.pop()
        if _FRAME_NAMES & set(c.co_names):
            return None
        ins = list(dis.get_instructions(c))
        for i, x in enumerate(ins):
            if x.argval != name:
                if type(x.argval) is tuple and name in x.argval:
                    return None
                continue
            if x.opname not in refs or i + 1 >= len(ins):
                return None
            nxt = ins[i + 1]
            if nxt.opname == "COPY" and i + 2 < len(ins) and ins[i + 2].opname in _ATTRS[:2]:
                nxt = ins[i + 2]    # (env.n += 1: the object copied, n loaded, then stored)
            if nxt.opname not in _ATTRS:
                return None
            out.setdefault(nxt.argval, None)
        todo.extend(k for k in c.co_consts if inspect.iscode(k))
    return tuple(out)


def object_names(obj, names):
    """The names of obj the walks enter when code uses names of it: those, and what the
    plain methods of its class among them use of their `self`, followed; None for the whole
    object."""
    if not hasattr(obj, "__dict__") or not _plain_class(type(obj)):
        return None
    out, todo, seen = set(), list(names), set()
    while todo:
        n = todo.pop()
        if n in out:
            continue
        out.add(n)      # (a method's name too: an instance attribute may shadow it later)
        attr = _unwrapped(inspect.getattr_static(type(obj), n, _MISSING))
        if _descriptor(attr):
            return None     # (a property: it takes the place of the instance's attribute)
        if n in vars(obj):
            if _calls_unseen(vars(obj)[n]):
                return None
            continue
        if attr is _MISSING:
            continue
        if not inspect.isfunction(attr) or hasattr(attr, "__wrapped__"):
            return None     # (a property, class value, static or class method, a wrapper)
        code = attr.__code__
        if code in seen:
            continue
        seen.add(code)
        more = attribute_uses(code, ("LOAD_FAST",), code.co_varnames[0]) \
            if code.co_argcount >= 1 else None
        if more is None:
            return None
        todo.extend(more)
    return frozenset(out)


def _descriptor(attr):
    return hasattr(type(attr), "__set__") or hasattr(type(attr), "__delete__")


def _calls_unseen(v):
    """Whether v, an instance attribute, is what a call may run with the object reached by
    ways the walks do not follow (a scheduler's wrapper of `opt.step`, holding the optimiser
    by a weak reference, reads its param_groups): a function, a method, a partial, a class;
    not a library's own function (miniai's `learn.loss_func = F.cross_entropy`)."""
    return (inspect.isroutine(v) or inspect.isclass(v) or isinstance(v, functools.partial)) \
        and not _library_function(v)


_PLAIN = (bool, int, float, str, bytes, type(None))


def _library_function(v):
    """Whether v is a function a library defines whose closure holds only plain values and
    such functions closing over plain values (the op table's wrappers): it cannot reach the
    user's objects. A closure made at run time over an object (a scheduler's wrapper of
    `opt.step`) is not one."""
    def library_s(f):
        return inspect.isfunction(f) and (f.__module__ or "").split(".")[0] in LIBRARIES

    if not library_s(v):
        return False
    inner = []
    for x in _cells(v):
        if type(x) not in _PLAIN and not library_s(x):
            return False
        inner.extend(() if type(x) in _PLAIN else _cells(x))
    return all(type(x) in _PLAIN for x in inner)


def _cells(f):
    """The values in function f's closure cells (an empty cell left out)."""
    out = []
    for cell in f.__closure__ or ():
        try:
            out.append(cell.cell_contents)
        except ValueError:
            pass
    return out


def narrowing(uses):
    """{id(object): (object, names)} of the captured roots walked through names alone;
    uses: [(object, function, ref)] of every captured root read (function_reads
    .captured_reads), ref ("global" or "cell", name) or None (read another way)."""
    out, whole = {}, set()
    for v, f, ref in uses:
        if id(v) in whole:
            continue
        direct = None if ref is None else attribute_uses(f.__code__, _REFS[ref[0]], ref[1])
        names = None if direct is None else object_names(v, direct)
        if names is None:
            whole.add(id(v))
            out.pop(id(v), None)
        else:
            out[id(v)] = (v, names | out[id(v)][1] if id(v) in out else names)
    return out
