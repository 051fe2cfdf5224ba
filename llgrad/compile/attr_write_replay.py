"""How a compiled call replays the writes of its trace into the objects it reaches
(attr_writes.py finds them): Write puts a structure of the call's results into a slot
found from the call's root, Pending makes a call's writes once its arguments are known,
and the helpers that find a slot's holder and bind a global name or a closure cell."""
import inspect

from ..tracer.pytree import unflatten
from .appended_lists import APPEND
from .guards import _is_object, signature_names


def _owner(fn):
    """The object collect() walks as `self`: a bound method's, or fn itself (a module)."""
    return getattr(fn, "__self__", None) if inspect.ismethod(fn) else \
        (fn if _is_object(fn) else None)


def _resolve(root, fn, args, kwargs, bound):
    if root[0] == "owner":
        return _owner(fn)
    if root[0] == "arg":
        if bound[0] is None:
            bound[0] = dict(signature_names(fn, args, kwargs))
        return bound[0][root[1]]
    where = root[1]
    if where[0] == "attr":          # (a followed function's defaults: guards.captured_reads)
        return getattr(where[1], where[2])
    return where[1].cell_contents if where[0] == "cell" else where[1][where[2]]


def _slots(holder):
    """A mutable holder's slots as a mapping (a dict, an object's attribute dict), or its
    items (a list). (Containers first, as the guard walk takes them: an OrderedDict, such
    as a module's _modules, has a __dict__ too.)"""
    return holder if isinstance(holder, (list, dict)) else vars(holder)


def _child(holder, k):
    return holder[k] if isinstance(holder, (list, tuple, dict)) else vars(holder)[k]


def _bind(where, value):
    """Bind a global name or a closure cell (captured_reads' `where`) to value."""
    if where[0] == "cell":
        where[1].cell_contents = value
    else:
        where[1][where[2]] = value


def _value(where):
    """What a global name or a closure cell (captured_reads' `where`) holds now."""
    if where[0] == "cell":
        try:
            return where[1].cell_contents
        except ValueError:
            return _EMPTY
    return where[1].get(where[2], _EMPTY)


_EMPTY = object()


class Write:
    """Put a structure of a call's results into a slot: the holder found from the call's
    root through `steps` (attribute names of objects, keys and indices of containers)."""
    __slots__ = ("root", "steps", "slot", "tree", "first", "n", "numbers")

    def __init__(self, root, steps, slot, tree, first, n, numbers=None):
        self.root, self.steps, self.slot, self.tree = root, steps, slot, tree
        # numbers: per result of the structure, the Python type it is written as (a
        # stand-in's graph value; a DerivedNumber's post), or None (a tensor)
        self.first, self.n, self.numbers = first, n, numbers

    def value(self, results):
        """What the slot gets from a call's results (its tensors for the writes)."""
        got = results[self.first:self.first + self.n]
        if self.numbers is not None:
            got = [r if k is None else k(r._data.item()) for r, k in zip(got, self.numbers)]
        return unflatten(self.tree, got)

    def where(self):
        """The slot as text (explain, dumps)."""
        if self.root[0] == "name":
            return self.root[1][-1] if self.root[1][0] == "global" else "<captured>"
        name = {"owner": "self", "arg": self.root[-1]}.get(self.root[0]) or \
            (self.root[1][-1] if self.root[1][0] == "global" else "<captured>")
        appends = self.slot is APPEND
        return name + "".join(f".{k}" if isinstance(k, str) and k.isidentifier() else f"[{k!r}]"
                              for k in self.steps + (() if appends else (self.slot,))) + \
            (".append(...)" if appends else "")


class Pending:
    """A compiled call's result whose writes are still to be made: CompiledFunction's call
    makes them with finish(), which knows the call's arguments."""
    __slots__ = ("result", "writes", "tensors")

    def __init__(self, result, writes, tensors):
        self.result, self.writes, self.tensors = result, writes, tensors

    def finish(self, fn, args, kwargs):
        bound = [None]
        for w in self.writes:
            if w.root[0] == "name":         # (a global name or a closure cell rebound)
                _bind(w.root[1], w.value(self.tensors))
                continue
            holder = _resolve(w.root, fn, args, kwargs, bound)
            for k in w.steps:
                holder = _child(holder, k)
            if w.slot is APPEND:
                holder.extend(w.value(self.tensors))
            else:
                _slots(holder)[w.slot] = w.value(self.tensors)
        return self.result
