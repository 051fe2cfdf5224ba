"""The guard values of Python scalars and of containers' structure (guards.py's walk)."""
import hashlib

import numpy as np

from ..runtime.symbolic_scalar import scalar_input
from ..runtime.tensor import Tensor
from .class_state import Same

# (guarded by value; NumPy's numbers and ranges too: a new one each call may take the id
# of the last one, freed)
_SCALARS = (int, float, str, bool, type(None), np.number, np.bool_, range)


def scalar_guard(v):
    """A Python scalar's guard value: its type and value (a float's zero with its sign)."""
    if isinstance(v, (float, np.floating)) and v == 0:
        return type(v).__name__, repr(v)
    return type(v).__name__, v


def _scalar_set(v):
    return type(v) in (set, frozenset) and all(isinstance(x, _SCALARS) for x in v)


def _plain_key(k):
    return isinstance(k, _SCALARS) or (type(k) in (tuple, frozenset) and all(map(_plain_key, k)))


def outline(tree):
    """A pytree structure (flatten's tree) as a guard value: kinds, lengths and the keys that
    are Python scalars or tuples of them; the tensors keying optimiser state by type only
    (their repr would hold their values; the walk takes them as inputs); other keys (an enum
    member, an object: `d.get(Mode.A)`) by identity."""
    if tree is None:
        return None
    kind, children = tree
    if kind is dict:
        return (dict, tuple(((type(k), k) if _plain_key(k) else type(k) if isinstance(
            k, Tensor) else Same(k), outline(c)) for k, c in children))
    return (kind, tuple(outline(c) for c in children))


def hooked(t):
    """Whether leaf t has hooks of its own or on its AccumulateGrad node. A step that runs
    its own backward would run them (its entries do not take such calls: they run eagerly);
    a function the caller differentiates leaves them to the engine. The flat key and the
    walkers give such calls to the full walk, which tells them apart."""
    acc = t._acc
    return bool(t._hooks) or (acc is not None and acc._hooked)


def without_grads(key, n_own):
    """A guard key (collect's items' values) without its .grad items: the key of a call for
    an entry whose trace read no .grad (compiled.py's grad-free entries)."""
    return key[:-1 - n_own] + key[-1:]


def grad_free(tracer, tensors, changed):
    """Whether a trace made with every .grad None serves calls whatever their .grad: it read
    none the call came with (tensor_autograd's .grad, a backward adding into one: trace_state.
    grad_of), each it changed cleared first (a zero_grad; a training step's .grad filled again
    as eager's). changed: entry.py's (position in tensors, new .grad) of those it changed."""
    return not tracer.grad_read and all(id(tensors[k][1]) in tracer.grad_cleared
                                        for k, _ in changed)


def inputable(v):
    """Whether Python number v can be a dynamic number's input (guards.dynamic_input): a
    float, or an int within int64 (a larger one is guarded by value: its arithmetic is
    Python's, which no int64 input gives)."""
    return type(v) is float or (type(v) is int and -2 ** 63 <= v < 2 ** 63)


def sharing(outlined, v, dynamic):
    """outlined, v's structure guard, with (where the walk takes numbers as inputs and some
    containers in v are one object) which are: a call where two lists or dicts holding input
    numbers have become one must not be served by a trace that wrote each number back on
    its own."""
    if not dynamic:
        return outlined
    ids, out, stack = {}, [], [v]
    while stack:
        c = stack.pop()
        first = id(c) not in ids
        out.append(ids.setdefault(id(c), len(ids)))
        if first:
            items = list(dict.values(c) if isinstance(c, dict) else c)
            stack.extend(x for x in reversed(items) if isinstance(x, (list, tuple, dict)))
    return outlined if len(ids) == len(out) else (outlined, tuple(out))


def dynamic_input(value, path):
    """The input standing for dynamic argument `path` in a call: a 0-d tensor of its number,
    known by the path (identity())."""
    t = scalar_input(value)
    t.__dict__["_llgrad_dynamic"] = path
    return t


def identity(t):
    """What a tensor input is, for telling whether a call replaced it: the tensor, the NumPy
    array a walk wrapped, or the optimiser's slot a hyper-parameter input stands for (each
    walk makes a new one: hypers.py)."""
    d = t.__dict__
    return d.get("_llgrad_hyper") or d.get("_llgrad_dynamic") or id(d.get("_llgrad_array", t))


def dynamic_numbers(roots, dynamic, tensors, guards):
    """roots without the dynamic arguments' numbers, which become inputs (a 0-d tensor of
    the number, symbolic_scalar.scalar_input) guarded by their type alone."""
    rest = []
    for path, v in roots:
        if path in dynamic and inputable(v):
            tensors.append((path, dynamic_input(v, path)))
            guards.append((path, ("dynamic number", type(v).__name__)))
        else:
            rest.append((path, v))
    return rest


class Entries:
    """A sparse tensor's guard value (guards.sparse_guard): its size, whether coalesced, and
    its indices and values by value (equal bytes), shown in a line (a recompile's reason)."""

    def __init__(self, t):
        idx, val = t._sp_indices._data, t._sp_values._data
        self.key = (t._sp_size, t._sp_coalesced, idx.shape, idx.tobytes(), val.dtype.str,
                    val.shape, np.ascontiguousarray(val).tobytes())

    def __eq__(self, other):
        return type(other) is Entries and self.key == other.key

    def __hash__(self):
        return hash(self.key)

    def __repr__(self):
        digest = hashlib.sha1(repr(self.key).encode()).hexdigest()[:12]
        return f"sparse entries (size {list(self.key[0])}, nnz {self.key[2][1]}, {digest})"
