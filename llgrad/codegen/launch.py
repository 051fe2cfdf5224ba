"""A kernel's launch: check the inputs, fill the pointer array, make one native call.

Native code trusts the geometry it was compiled for, so every input's dtype, shape and
strides (and alignment) are checked against the graph's input types before the call; a
mismatch raises ValueError and no native code runs. Output buffers are allocated per call
(outputs are returned to the caller).

Native code runs without the GIL, so several threads may be inside one kernel at once:
each call takes a private context (pointer array, scratch arena, error flags) from a pool
and puts it back afterwards, so a context is never shared between concurrent calls, and a
single-threaded caller reuses one context forever (no allocation per call).

The launches are closures (and, for the common call, straight-line code made for the
kernel: _lean_launcher) that hold the native function, never the Kernel (kernel.py)."""
import ctypes
import functools
from operator import and_, attrgetter

import numpy as np

from ..ir.graph import StackType
from ..ir.np_address import _DATA_OFFSET, _WORDS, _from_address, data_pointer
from .lowerings.stacks import Descriptors, stack_input

empty = np.empty


def _check_input(specs, k, a):
    """The slow path: a clear ValueError for an out-of-spec input, else the array."""
    spec = specs[k]
    what = f"input {k} (%{spec.name})"
    if not isinstance(a, np.ndarray):
        a = np.asarray(a)
    if a.dtype != spec.dtype:
        raise ValueError(f"{what}: expected dtype {spec.dtype}, got {a.dtype}")
    if spec.stack:
        return stack_input(a, spec.shape, what)
    if a.shape != spec.shape:
        raise ValueError(f"{what}: expected shape {spec.shape}, got {a.shape}")
    if a.size:
        for n, want, got in zip(a.shape, spec.bstrides, a.strides):
            if n > 1 and want != got:
                got_el = tuple(s / a.itemsize if s % a.itemsize else s // a.itemsize
                               for s in a.strides)
                raise ValueError(f"{what}: expected strides {spec.strides} (elements), "
                                 f"got {got_el}")
        if data_pointer(a) & spec.mask:
            raise ValueError(f"{what}: the array's data is not aligned to its itemsize")
    return a


class _InSpec:
    __slots__ = ("name", "dtype", "shape", "strides", "bstrides", "itemsize", "mask", "stack")

    def __init__(self, v):
        t = v.type
        self.stack = isinstance(t, StackType)   # (n, *entry): never the fast path's shape
        if self.stack:
            t = t.elem
        self.name = v.name
        self.dtype = np.dtype(t.dtype)
        self.shape = tuple(t.shape)
        self.strides = tuple(t.strides)
        self.itemsize = self.dtype.itemsize
        self.bstrides = tuple(s * self.itemsize for s in t.strides)
        self.mask = self.itemsize - 1


class _Context:
    """What one call in flight owns: the pointer array (scratch slots filled once), its
    address, the arena behind the scratch slots, and the error words of index checks."""
    __slots__ = ("ptrs", "addr", "arena", "flags", "stacks", "lengths", "table")

    def __init__(self, plan):
        # (a slot past the plan's own: an entry that walks a call table reads it there)
        self.ptrs = (ctypes.c_void_p * (plan.nslots + 1))()
        self.addr = ctypes.addressof(self.ptrs)
        self.table = table = getattr(plan, "call_table", None)
        if table is not None:
            self.ptrs[plan.nslots] = table.ctypes.data
        self.arena = np.empty(plan.arena_bytes + 64, np.uint8)
        base = -(-self.arena.ctypes.data // 64) * 64
        for b in plan.scratch:
            self.ptrs[b.slot] = base + b.offset
        # index-driven groups raise these words on an out-of-range index (ops_index)
        self.flags = [(ctypes.c_int64.from_address(base + b.offset), msg)
                      for b, msg in plan.flags]
        # a loop's saved iterations, grown by native code (stacks.py)
        self.stacks = Descriptors(base, plan) if plan.stacks else None
        self.lengths = [(v.index, ctypes.c_int64.from_address(base + b.offset))
                        for v, b in plan.lengths.items()]


def _launcher(fn, pool, plan, name, fast_specs, specs, layout, direct, lean=True, tail=None):
    """A kernel launch, as a closure (it runs on every call of a compiled function, where a
    method's attribute lookups cost; it holds no reference to the Kernel, so it makes no
    reference cycle): check the inputs against the graph's input types and store their
    data pointers, allocate the output buffers `layout` lists ((slot, dtype, shape) each)
    and store theirs, make the native call, then check the error words. Returns the
    outputs (direct) or (the inputs, as converted by the slow check, the outputs).

    With `lean`, the common call runs a lean launch made for the kernel (_lean_launcher);
    this general one takes every other call and kernel.

    With a tail (its native function, the slots of its late outputs, the inputs to let go
    of: lower.release_split), the entry runs first; then the launch drops its references
    to those inputs (in `arrays` too, when it is a list: the caller hands them over), and
    only then allocates the late outputs and runs the tail."""
    off, nin, ndarray = _DATA_OFFSET, len(fast_specs), np.ndarray
    tail_fn, late, release = tail or (None, (), ())

    def allocate(ptrs, outs, in_tail):
        for j, (slot, dt, shape) in enumerate(layout):
            if (slot in late) == in_tail:
                outs[j] = o = empty(shape, dt)
                ptrs[slot] = _from_address(id(o) + off).value if off is not None \
                    else o.ctypes.data

    def launch(arrays):
        given = arrays
        if len(arrays) != nin:
            raise ValueError(f"kernel for graph {name} takes {nin} inputs, "
                             f"got {len(arrays)}")
        try:
            ctx = pool.pop()
        except IndexError:               # another thread holds the context: make one
            ctx = _Context(plan)
        try:
            ptrs, k, converted = ctx.ptrs, 0, None
            for a, (dtype, shape, bstrides, mask) in zip(arrays, fast_specs):
                if type(a) is ndarray and a.dtype is dtype and a.shape == shape \
                        and a.strides == bstrides and off is not None:
                    p = _from_address(id(a) + off).value or 0
                    if p & mask:
                        _check_input(specs, k, a)           # raises: misaligned
                else:
                    a = _check_input(specs, k, a)
                    if converted is None:                   # (keeps it alive for the call)
                        converted = list(arrays)
                    converted[k] = a
                    p = data_pointer(a)
                ptrs[k] = p
                k += 1
            if converted is not None:
                arrays = converted
            for k, word in ctx.lengths:         # stack inputs: native code bounds-checks
                word.value = len(arrays[k])
            outs = [None] * len(layout)
            allocate(ptrs, outs, False)
            fn(ctx.addr)
            if tail_fn is not None:
                a = None
                for k in release:
                    if type(given) is list:
                        given[k] = None
                    if converted is not None:
                        converted[k] = None
                allocate(ptrs, outs, True)
                tail_fn(ctx.addr)
            if ctx.stacks is not None:        # (freed before any error below)
                outs += ctx.stacks.harvest()
            if ctx.flags:
                for word, msg in ctx.flags:
                    if word.value:
                        raise IndexError(msg)
        finally:
            pool.append(ctx)
        return outs if direct else (arrays, outs)
    return lean and tail is None and _lean_launcher(fn, pool, plan, name, fast_specs, layout,
                                                    direct, launch) or launch


def _lean_launcher(fn, pool, plan, name, fast_specs, layout, direct, general):
    """The launch of the common call as straight-line code made for this kernel (every
    spec a constant, no loop over inputs and outputs: a quarter of the launch's own cost
    on a one-input kernel; compiling it takes ~0.5 ms for eight inputs), or None.
    Common: every input an exact ndarray with its spec's dtype, shape and byte strides,
    aligned; any other call goes to `general`, which converts input by input or raises,
    so both make the same checks. Not for kernels with stacks (loops over stored
    iterations) or stack inputs, nor without _WORDS."""
    if _WORDS is None or plan.stacks or plan.lengths:
        return None
    if len(fast_specs) + len(layout) > LEAN_SOURCE_ARRAYS:
        return _bulk_launcher(fn, pool, plan, fast_specs, layout, direct, general)
    off, n = _DATA_OFFSET, len(fast_specs)
    env = {"fn": fn, "pool": pool, "general": general, "ndarray": np.ndarray,
           "words": _WORDS, "empty": empty, "new_context": functools.partial(_Context, plan)}
    src = ["def launch(arrays):", f"    if len(arrays) != {n}:", "        return general(arrays)"]
    if n:
        src.append("    " + "".join(f"a{k}, " for k in range(n)) + "= arrays")
        conds = []
        for k, (dtype, shape, bstrides, _) in enumerate(fast_specs):
            env[f"d{k}"], env[f"s{k}"], env[f"b{k}"] = dtype, shape, bstrides
            conds.append(f"type(a{k}) is ndarray and a{k}.dtype is d{k} and "
                         f"a{k}.shape == s{k} and a{k}.strides == b{k}")
        src += ["    if not (" + " and ".join(conds) + "):", "        return general(arrays)"]
        src += [f"    p{k} = words[(id(a{k}) + {off}) >> 3]" for k in range(n)]
        masks = [f"p{k} & {spec[3]}" for k, spec in enumerate(fast_specs) if spec[3]]
        if masks:             # (one test, a short source: compile() costs ~1 ms a KB)
            src += ["    if " + " | ".join(masks) + ":",
                    "        return general(arrays)   # a misaligned input: it raises"]
    src += ["    try:", "        ctx = pool.pop()", "    except IndexError:",
            "        ctx = new_context()          # another thread holds the context",
            "    try:", "        ptrs = ctx.ptrs"]
    src += [f"        ptrs[{k}] = p{k}" for k in range(n)]
    for j, (slot, dt, shape) in enumerate(layout):
        env[f"t{j}"], env[f"h{j}"] = dt, shape
        src += [f"        o{j} = empty(h{j}, t{j})",
                f"        ptrs[{slot}] = words[(id(o{j}) + {off}) >> 3]"]
    src.append("        fn(ctx.addr)")
    if plan.flags:
        src += ["        for word, msg in ctx.flags:", "            if word.value:",
                "                raise IndexError(msg)"]
    outs = "[" + ", ".join(f"o{j}" for j in range(len(layout))) + "]"
    src += ["    finally:", "        pool.append(ctx)",
            f"    return {outs}" if direct else f"    return arrays, {outs}"]
    try:
        exec(compile("\n".join(src), f"<launch of {name}>", "exec"), env)  # noqa: S102
    except (SyntaxError, RecursionError, MemoryError):     # (too many inputs for the parser)
        return None
    return env["launch"]


# a kernel with more inputs and outputs than this takes _bulk_launcher's launch: compiling
# the straight-line source of one cost ~25 ms at 12 transformer layers (310 arrays)
LEAN_SOURCE_ARRAYS = 48
_dtype, _shape, _strides = attrgetter("dtype"), attrgetter("shape"), attrgetter("strides")


def _bulk_launcher(fn, pool, plan, fast_specs, layout, direct, general):
    """The lean launch of a kernel with many arrays, as a closure over lists of the specs
    (nothing compiled): the same checks as _lean_launcher's straight-line code (each input
    an exact ndarray with its spec's dtype, shape, byte strides and alignment, else
    `general`), made over all inputs at once by map and list comparison."""
    off, n, words = _DATA_OFFSET, len(fast_specs), _WORDS
    types = [np.ndarray] * n
    dtypes, shapes, strides, masks = ([spec[i] for spec in fast_specs] for i in range(4))
    out_slots = [slot for slot, _, _ in layout]
    out_specs = [(shape, dt) for _, dt, shape in layout]
    new_context, checks = functools.partial(_Context, plan), bool(plan.flags)

    def launch(arrays):
        if len(arrays) != n or list(map(type, arrays)) != types or \
                list(map(_dtype, arrays)) != dtypes or list(map(_shape, arrays)) != shapes \
                or list(map(_strides, arrays)) != strides:
            return general(arrays)
        ps = [words[(id(a) + off) >> 3] for a in arrays]
        if any(map(and_, ps, masks)):
            return general(arrays)          # a misaligned input: it raises
        try:
            ctx = pool.pop()
        except IndexError:
            ctx = new_context()             # another thread holds the context
        try:
            ptrs = ctx.ptrs
            ptrs[:n] = ps
            outs = [empty(shape, dt) for shape, dt in out_specs]
            for slot, o in zip(out_slots, outs):
                ptrs[slot] = words[(id(o) + off) >> 3]
            fn(ctx.addr)
            if checks:
                for word, msg in ctx.flags:
                    if word.value:
                        raise IndexError(msg)
        finally:
            pool.append(ctx)
        return outs if direct else (arrays, outs)
    return launch
