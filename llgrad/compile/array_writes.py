"""NumPy arrays a compiled function makes and puts into the objects it reaches, replayed by
compiled calls (attr_writes.py's slots). karpathy/pytorch-made's update_masks keeps its
orderings so, `self.m[l] = rng.randint(...)` from a RandomState seeded by a number the
guards see: a trace that wrote such an array used not to be kept, so every call traced
again up to the recompile limit and then ran eagerly.

An array the run made is a constant of the entry, as a number it writes is: the entry's
guards determine it (NumPy's global generator makes a call run eagerly, numpy_reads.py; a
tensor's values reach NumPy only through value guards). Each compiled call writes a fresh
copy of the traced run's array, as each eager run makes a fresh array, so an in-place change
to one call's array does not reach the next. An array the call reached before the run, or
a view of one (`self.a = self.b`, `self.a = self.b[1:]`), is not replayed: eager's slots
share its memory, compiled calls' copies would not."""
import numpy as np

from ..tracer.pytree import Constant
from ..tracer.returned import is_constant


def reached(places, names):
    """The ids of the NumPy arrays the call could reach before its run: in the slots of the
    holders the walk met (attr_writes.Slots.places: their contents before the run), in tuples
    there, and bound to the names it reads or binds."""
    ids, stack = set(), [v for *_, before in places
                         for v in (before.values() if isinstance(before, dict) else before)]
    stack += [before for _, _, before, _ in names]
    while stack:
        v = stack.pop()
        if type(v) is tuple:
            stack.extend(v)
        elif isinstance(v, np.ndarray):
            ids.add(id(v))
    return ids


def constant(holders, leaf):
    """Whether a written leaf is a constant a call replays: returned.is_constant's, or a
    NumPy array of numbers the run made (holders: what reached() found, among other ids)."""
    if is_constant(leaf):
        return True
    if type(leaf) is not np.ndarray or leaf.dtype.hasobject:
        return False
    base = leaf
    while base is not None:
        if id(base) in holders:
            return False
        base = base.base if isinstance(base, np.ndarray) else None
    return True


def _fresh_copy(items):
    return items[0].copy()


def copying(tree):
    """tree (pytree's, with Constant nodes) with each constant array as a node that makes a
    copy of it whenever the tree is unflattened."""
    if tree is None:
        return None
    kind, children = tree
    if kind is Constant:
        return (_fresh_copy, [tree]) if isinstance(children, np.ndarray) else tree
    if kind is dict:
        return (kind, [(k, copying(c)) for k, c in children])
    return (kind, [copying(c) for c in children])


def written_paths(leaves):
    """The guard walk's items of the arrays among a write's leaves [(path, leaf)]: the write
    replays them, so the run's change to them is no unreplayed change."""
    return [n for p, x in leaves if isinstance(x, np.ndarray) for n in (p, f"contents of {p}")]
