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
attribute it reads by name, or an item of a list, tuple or dict it names: `D["arr"]`, `L[0]`)
are marked: one it reaches only through an object (a trainer's dataset beside the model whose
step is compiled) would cost a copy of its bytes a call.

A NumPy write into an array also read as a tensor (`X[0] += 1` beside from_numpy(X[:3]))
makes the traced run one not kept (numpy_writes): the entry would replay only the writes the
trace saw.

The names of the user's functions and methods the function calls by name (a global or
closure function, a method of the object a compiled method or module is) count as its own.

An array read both ways in one trace (from_numpy(X[:10]) beside X.mean(), or
from_numpy(X).add_(1) then float(X[5])) is linked, yet its NumPy read is baked in: a linked
array is marked too where the function's code uses its name (or its container's) other than
as the argument of a tensor maker (`from_numpy(X[i:j])`, `tensor(D["a"][0])`: _numpy_uses),
so an array only read as a tensor still costs nothing.

Left: an array read with NumPy by a method of another object the function reaches, or
linked and fancy-indexed (`from_numpy(X[:3])` beside `tensor(X[idx])`, idx an array: the
copy is read as a tensor maker's argument)."""
import dis
import functools
import re
import types

import numpy as np

MARK = "<contents of> "     # (+ the walk's path of a marked array)
SMALL = 256                 # (guards._SMALL_ARRAY: what the walk always guards)


def mark(cf, entry, tensors, guards, snapshot, changed):
    """After a traced run of CompiledFunction cf ([(path, input)] tensors) that left no
    Python state changed (changed: side_effects.unreplayed_change's finding, returned as it
    is, or a NumPy write the entry does not replay, numpy_writes'; a changed run is not kept,
    and the next one marks): mark the large arrays it reached but did not read as tensors, so
    that the walk guards their contents from the next call on. The run was eager's; its
    entry, keyed without those contents, serves no later call. guards: the walk's items
    (_in_named_container); snapshot: the StateSnapshot taken before the run (numpy_writes)."""
    changed = changed or numpy_writes(entry, tensors, snapshot)
    names, codes = _names_read(cf.fn)
    used = None if codes is None else _numpy_uses(codes)     # (linked arrays: those too)
    new = frozenset(MARK + path for path, t in tensors
                    if (a := t.__dict__.get("_llgrad_array")) is not None and a.size > SMALL
                    and (id(t._storage) not in entry.linked_arrays and
                         (_named(path, names) or _in_named_container(path, names, guards))
                         or id(t._storage) in entry.linked_arrays and
                         (_named(path, used) or _in_named_container(path, used, guards)))) \
        - cf._dynamic
    if new and not changed:
        cf._dynamic = cf._dynamic | new
        cf._fast.clear()    # (the flat keys do not guard the contents: the full walk does)
        cf._walkers = []
    return changed


def numpy_writes(entry, tensors, snapshot):
    """The first input array read as a tensor (linked) whose bytes the traced run changed
    with NumPy (`X[0] += 1`, np.add(X, 1, out=X) beside from_numpy(X[:3])), as text, or None:
    the entry replays only the writes the trace saw (none into this input here), so compiled
    calls would leave the array as it was. An unlinked array's NumPy write is found by the
    guard of its contents (mark). Left: an input the trace wrote as a tensor and NumPy too."""
    if snapshot is None or not entry.linked_arrays:
        return None
    before = {id(st): data for st, _, data in snapshot.storages}
    mutated = entry.forward.mutated if entry.forward is not None else {}
    for i, (path, t) in enumerate(tensors):
        st = t._storage
        if id(st) in entry.linked_arrays and i not in mutated and id(st) in before and \
                st.base.tobytes() != before[id(st)].tobytes():
            return f"the NumPy array at {path} (written with NumPy, not as a tensor)"
    return None


def _names_read(fn):
    """(The names fn's code (and the functions defined in it, and the user's functions and
    methods it calls by name: a global or closure function, a method of the object a
    compiled method or module is) reads or binds, those code objects), or (None, None)
    where it has no code of its own."""
    f = getattr(fn, "__func__", fn)
    code = getattr(f, "__code__", None)
    owner = getattr(fn, "__self__", None) if code is not None else fn
    code = code or getattr(getattr(type(fn), "forward", None), "__code__", None)
    if code is None:
        return None, None
    cls = type(owner) if owner is not None else None
    names, seen = set(), {code}
    stack = [(code, getattr(f, "__globals__", {}))]
    stack.extend((c.cell_contents.__code__, c.cell_contents.__globals__)
                 for c in getattr(f, "__closure__", None) or () if _user_cell(c))
    while stack:
        c, glob = stack.pop()
        seen.add(c)             # (a closure's helper too: _numpy_uses reads them all)
        names.update(c.co_names, c.co_varnames, c.co_freevars, c.co_cellvars)
        stack.extend((k, glob) for k in c.co_consts if isinstance(k, types.CodeType))
        # (an attribute read as getattr(obj, "table") names it too)
        names.update(k for k in c.co_consts if type(k) is str and k.isidentifier())
        for n in c.co_names:    # (a helper reading the array with NumPy: `self.scale()`)
            for g in (glob.get(n), getattr(cls, n, None)):
                if _user_function(g) and g.__code__ not in seen:
                    seen.add(g.__code__)
                    stack.append((g.__code__, g.__globals__))
    return names, seen


_MAKERS = frozenset(("from_numpy", "as_tensor", "tensor", "asarray", "Tensor"))
_LOADS = frozenset(("LOAD_FAST", "LOAD_DEREF", "LOAD_GLOBAL", "LOAD_NAME", "LOAD_ATTR",
                    "LOAD_CLASSDEREF"))
# (what may come between a name's load and the tensor maker's call: the subscript and
# slice bounds of `X[i * b:j]`, `D["a"][0]`, and keyword arguments after it: `dtype=...`)
_BETWEEN = frozenset(("LOAD_CONST", "BUILD_SLICE", "BINARY_SUBSCR", "BINARY_OP",
                      "LOAD_FAST", "LOAD_DEREF", "LOAD_GLOBAL", "LOAD_ATTR", "KW_NAMES",
                      "PRECALL", "CALL"))


def _numpy_uses(codes):
    """The names the code objects load other than as the first argument of a tensor maker
    (`from_numpy(X[:10])`, `tensor(s[0], dtype=...)`): `X.mean()`, `float(s[0][5])`,
    `Y = X`, `for row in X` may read the array with NumPy (its contents guarded: mark);
    `X.shape`, `len(X)` read what the input's guards hold."""
    return frozenset().union(*(_code_numpy_uses(c) for c in codes))


@functools.lru_cache(maxsize=1024)
def _code_numpy_uses(code):
    out, stack = set(), [code]
    while stack:
        c = stack.pop()
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
        ins = [i for i in dis.get_instructions(c) if i.opname != "CACHE"]
        for k, i in enumerate(ins):
            if i.opname in _LOADS and type(i.argval) is str and not (
                    _made_tensor(ins, k) or _layout_read(ins, k)):
                out.add(i.argval)
    return out


_LAYOUT = frozenset(("shape", "dtype", "ndim", "size", "strides", "itemsize", "nbytes"))


def _layout_read(ins, k):
    """Whether ins[k]'s value is read for its layout alone (`X.shape[0]`, `len(X)`), which
    the guards of an input hold: no read of its contents."""
    nxt = ins[k + 1] if k + 1 < len(ins) else None
    if nxt is not None and nxt.opname == "LOAD_ATTR" and nxt.argval in _LAYOUT:
        return True
    return k > 0 and ins[k - 1].opname == "LOAD_GLOBAL" and ins[k - 1].argval == "len" \
        and nxt is not None and nxt.opname in ("PRECALL", "CALL") and nxt.argval == 1


def _made_tensor(ins, k):
    """Whether the value ins[k] loads, subscripted (by numbers computed from other names),
    is an argument of a tensor maker's call (the maker loaded just before it): the stack
    from ins[k] on, the array's value "A" on it, another's "o"."""
    if k == 0 or ins[k - 1].opname not in ("LOAD_ATTR", "LOAD_METHOD", "LOAD_GLOBAL") or \
            ins[k - 1].argval not in _MAKERS:
        return False
    stack = ["A"]
    for j in range(k + 1, len(ins)):
        i, op = ins[j], ins[j].opname
        if op in ("PRECALL", "CALL"):
            if op == "CALL" and ins[j - 1].opname == "PRECALL":
                continue
            if len(stack) <= i.argval:     # (the maker's call: its arguments from "A" on)
                return True
            n = i.argval + 1                # (a call inside an index, int(i): its callable)
        else:
            n = {"LOAD_ATTR": 1, "BUILD_SLICE": i.argval, "BINARY_SUBSCR": 2,
                 "BINARY_OP": 2}.get(op, 0)
        if op not in _BETWEEN or len(stack) < n:
            return False
        popped = stack[len(stack) - n:] if n else []
        del stack[len(stack) - n:]
        if op == "BINARY_SUBSCR":   # (the array subscripted: still the array's value)
            if popped[1] == "A":
                return False
            stack.append(popped[0])
        elif "A" in popped:         # (X.T, X[0] + 1: not the array itself)
            return False
        elif op != "KW_NAMES":
            stack.append("o")
    return False


def _user_function(g):
    return isinstance(g, types.FunctionType) and not (g.__module__ or "").startswith(
        ("llgrad.", "numpy"))


def _user_cell(cell):
    try:
        return _user_function(cell.cell_contents)
    except ValueError:      # (an empty cell)
        return False


def _named(path, names):
    """Whether the array at path may be one the function's own code names (the path's last
    parts, joined as the walk joins them, one of names): an array it only reaches, a
    dataset kept on the object whose method is compiled, is not marked (its contents would
    be copied at every call, 63 MB for a 20,000-image array: 0.5 -> 140 ms a step)."""
    if names is None:
        return True
    parts = re.split(r"[._ ]", path)
    return any("_".join(parts[k:]) in names for k in range(len(parts)))


def _in_named_container(path, names, guards):
    """Whether the array at path is an item (at any depth, through lists, tuples and dicts
    only) of a container the function's code names: `D["arr"].mean()`, `float(L[0][5])`,
    `for k, v in D.items()` read it so, with no name of its own in the code (the first call's
    numbers were replayed when the path's last part alone counted). guards: the walk's
    [(path, item)], whose "structure of " items are its containers and ("object", ...)
    items its objects (an object on the way, a dataset on a list's trainer, is a hop
    through an object: not this)."""
    containers = [p[len("structure of "):] for p, _ in guards
                  if type(p) is str and p.startswith("structure of ")]
    inside = [c for c in containers if path.startswith(c + "_") and _named(c, names)]
    if not inside:
        return False
    c = min(inside, key=len)
    return not any(type(g) is tuple and g[:1] == ("object",) and type(p) is str and
                   path.startswith(p + "_") and len(p) > len(c) for p, g in guards)


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
