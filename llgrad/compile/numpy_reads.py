"""NumPy arrays a compiled function reaches and may read with NumPy, not as tensors.

An array the guard walk reaches is an input of the trace, a tensor over its memory: what
from_numpy / as_tensor / tensor makes of it or of a view of it inside the function reads
that input at each call (tracer/bindings.array_storage). What the function computes from
it with NumPy instead (X[idx] with an index array, X.mean(), float(X[i]), `counts[k] += 1`)
the trace cannot see: it is baked into the trace, so compiled calls replayed the first
call's numbers after the array changed, silently. A small array (guards._SMALL_ARRAY
elements or fewer) is guarded by its contents for that reason; a larger one only once a
trace shows it may be read so: after a traced run that reached it and never read it as a
tensor, its path is marked (MARK + path in the compiled function's dynamic set) and from
then on the walk guards its contents too (a copy of its bytes a call: the price of reading
it with NumPy; an array read only as a tensor costs nothing). An array the function never
names (a harness's records behind an object it reaches) costs the same: a trace cannot tell
it from one read with NumPy. The run's entry is kept (its key lacks the contents: no later
call finds it), so a function called once still has compiled code to show.

An array from_numpy refuses (object or byte-swapped items, negative strides) or of a
subclass (np.matrix, np.memmap, a masked array) is no input at all: a small one is guarded
by its contents, a larger one or one of objects makes the call run eagerly (`unwrapped`).

Only arrays the function's own code names (an argument, a global or closure variable, an
attribute it reads by name) are marked: one it reaches only through an object (a trainer's
dataset beside the model whose step is compiled) would cost a copy of its bytes a call.

Left: an array read both ways in one trace (from_numpy(X[:10]) beside X.mean()) is not
marked, nor one read with NumPy only by other functions the compiled one calls
(tests/compile/test_contract_sweep60.py: its strict xfail)."""
import re
import types

import numpy as np

MARK = "<contents of> "     # (+ the walk's path of a marked array)
SMALL = 256                 # (guards._SMALL_ARRAY: what the walk always guards)


def mark(cf, entry, tensors, changed):
    """After a traced run of CompiledFunction cf ([(path, input)] tensors) that left no
    Python state changed (changed: side_effects.unreplayed_change's finding, returned as it
    is; a changed run is not kept, and the next one marks): mark the large arrays it reached
    but did not read as tensors, so that the walk guards their contents from the next call
    on. The run was eager's; its entry, keyed without those contents, serves no later call."""
    names = _names_read(cf.fn)
    new = frozenset(MARK + path for path, t in tensors
                    if (a := t.__dict__.get("_llgrad_array")) is not None and a.size > SMALL
                    and id(t._storage) not in entry.linked_arrays and _named(path, names)) \
        - cf._dynamic
    if new and not changed:
        cf._dynamic = cf._dynamic | new
        cf._fast.clear()    # (the flat keys do not guard the contents: the full walk does)
        cf._walkers = []
    return changed


def _names_read(fn):
    """The names fn's code (and the functions defined in it) reads or binds, or None where
    it has no code of its own to read."""
    f = getattr(fn, "__func__", fn)
    code = getattr(f, "__code__", None) or getattr(getattr(type(fn), "forward", None),
                                                   "__code__", None)
    if code is None:
        return None
    names, stack = set(), [code]
    while stack:
        c = stack.pop()
        names.update(c.co_names, c.co_varnames, c.co_freevars, c.co_cellvars)
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    return names


def _named(path, names):
    """Whether the array at path may be one the function's own code names (the path's last
    parts, joined as the walk joins them, one of names): an array it only reaches, a
    dataset kept on the object whose method is compiled, is not marked (its contents would
    be copied at every call, 63 MB for a 20,000-image array: 0.5 -> 140 ms a step)."""
    if names is None:
        return True
    parts = re.split(r"[._ ]", path)
    return any("_".join(parts[k:]) in names for k in range(len(parts)))


def unwrapped(v):
    """The guard item of an ndarray the walk does not make an input (see the module)."""
    if v.dtype.hasobject:
        return ("unguarded", "it reaches a NumPy array of Python objects, whose items "
                "compile does not guard")
    if v.size > SMALL:
        return ("unguarded", f"it reaches a NumPy array that is no input of compiled code "
                f"({type(v).__name__} of {v.dtype}, strides {v.strides}), whose "
                f"{v.size} elements compile does not guard (pass np.ascontiguousarray of it)")
    mask = np.ma.getmaskarray(v).tobytes() if isinstance(v, np.ma.MaskedArray) else None
    return ("array", type(v), v.dtype.str, v.shape, np.ascontiguousarray(v).tobytes(), mask)
