"""A native kernel's groups, one native function each: what the profiler times and what
debug.compare runs group by group.

A Kernel's module has one exported entry that calls every group of its plan in order
(codegen/build.py). Here the same plan is emitted again (the groups' code is the very
code the kernel runs: the same lowerings, the same plan, the same options) into a module
that exports one wrapper per group, `entry_g<k>(bufs)`, taking the kernel's own pointer
array. A copy of the Kernel whose native function is a Python function calling those
wrappers one by one then checks its inputs, allocates its outputs and fills its pointer
array exactly as the kernel does, and runs the same groups, with something done between
them (a timing, a look at a group's results). Built only when asked for (a profile, a
comparison), compiled once per kernel and kept in the JIT's memory and disk caches under a
key of its own; codegen is not changed for it."""
import copy
import ctypes

import numpy as np

from .log import short_loc

_KEY_SALT = "llgrad-group-wrappers-1"
_cache = {}         # kernel cache key -> GroupKernel (or the reason it cannot be made)

MATMULS = {"mm": 0, "bmm": 0, "matmul": 0, "dot": 0, "mv": 0, "addmm": 1}


class Call:
    """One group: its native wrapper, the plan's Group, a label and its cost per call."""
    __slots__ = ("fn", "group", "label", "checks", "bytes", "flops", "index")

    def __init__(self, fn, group, label, checks, nbytes, flops):
        self.fn, self.group, self.label, self.checks = fn, group, label, checks
        self.bytes, self.flops, self.index = nbytes, flops, group.index


class GroupKernel:
    def __init__(self, kernel, plan, calls):
        self.kernel, self.plan, self.calls = kernel, plan, calls

    def variant(self, native):
        """A copy of the kernel whose native call is native(addr) (a Python function):
        the launch (checks, allocation, pointer array) is the kernel's own."""
        k = copy.copy(self.kernel)
        k._pool = []
        k._pool.append(k._new_context())
        k._tail = None          # (every group runs in native(): the split's tail included)
        k._fn = native          # (makes the launchers)
        return k


def group_kernel(kernel):
    """The GroupKernel of a Kernel, or a str saying why there is none."""
    key = getattr(kernel, "cache_key", None)
    hit = _cache.get(key) if key is not None else None
    if hit is None:
        try:
            hit = _build(kernel)
        except Exception as e:          # (never in the way of a profile: whole-kernel times)
            hit = f"{type(e).__name__}: {e}"
        if key is not None:
            _cache[key] = hit
    if isinstance(hit, GroupKernel) and hit.kernel is not kernel:
        hit = _rebind(hit, kernel)
    return hit


def _rebind(gk, kernel):
    """gk's group functions for another kernel with the same code (another compiled
    function's, two models of one class, say): copies of it must run with that kernel's
    launch, whose outputs are keyed by its own graph's Values (not the first kernel's), and
    a comparison must read its own plan's results."""
    from ..codegen import build
    plan0 = kernel.plan
    plan = build.plan_graph(plan0.graph, plan0.options)
    if plan.describe() != gk.plan.describe() or len(plan.groups) != len(gk.calls) or \
            plan.nslots != gk.plan.nslots or plan.arena_bytes != gk.plan.arena_bytes:
        return "the plan made again differs from the kernel's"
    return GroupKernel(kernel, plan, _calls(plan, [c.fn for c in gk.calls]))


def _build(kernel):
    from ..codegen import build
    from ..codegen.kernel import Kernel
    from ..codegen.lower import _pool_if_threaded
    from ..codegen.native.threadcount import RUN as THREAD_CALL
    from ..codegen.lowerings.pool import ensure_pool
    from ..codegen.native import jit, keys
    plan0 = kernel.plan
    plan = build.plan_graph(plan0.graph, plan0.options)
    if plan.describe() != plan0.describe() or plan.nslots != plan0.nslots or \
            plan.arena_bytes != plan0.arena_bytes:
        return "the plan made again differs from the kernel's"
    name = f"{kernel.entry_name}_groups"
    key = keys.key_for(kernel.cache_key or str(plan.graph), _KEY_SALT)
    wrappers = [f"{name}_g{grp.index}" for grp in plan.groups]
    if not wrappers:
        return "the kernel has no groups"
    with _lock(key):
        compiled = jit.lookup(key, wrappers[0], before_load=_pool_if_threaded)
        if compiled is None:
            mod = jit.new_module(name)
            consts = build._constants(mod, plan, "const")
            for call, wname in zip(build.group_calls(mod, plan, name), wrappers):
                build._entry(mod, wname, [call], consts)
            if THREAD_CALL in mod.globals:
                ensure_pool()
            compiled = jit.compile_module(mod, wrappers, key=key)
    fns = [Kernel._native_fn(compiled.address(wname)) for wname in wrappers]
    return GroupKernel(kernel, plan, _calls(plan, fns))


def _calls(plan, fns):
    """A Call for each group of plan, fns[k] the native wrapper of group k."""
    flags = {id(b) for b, _ in plan.flags} if plan.in_place else set()
    return [Call(fn, grp, group_label(grp), tuple(b.slot for b in grp.temps if id(b) in flags),
                 group_bytes(plan, grp), group_flops(grp))
            for grp, fn in zip(plan.groups, fns)]


def _lock(key):
    from ..codegen.lower import build_lock
    return build_lock(key)


def flag_raised(addr, slot):
    """Whether the error word in buffer `slot` of the pointer array at addr is set."""
    p = ctypes.c_void_p.from_address(addr + 8 * slot).value
    return bool(p) and ctypes.c_int64.from_address(p).value != 0


def read_value(addr, plan, v):
    """A copy of value v (a group's result) from its buffer, through the pointer array."""
    from ..codegen.schedule.plan import root_of
    root = root_of(v)
    buf = plan.buffers[root]
    t = v.type
    dt = np.dtype(t.dtype)
    whole, shift = buf, 0           # (a slice: a block of its parent's, codegen/schedule/concat.py)
    while whole.role == "slice":
        whole, shift = whole.parent, shift + whole.base
    p = ctypes.c_void_p.from_address(addr + 8 * whole.slot).value
    if p:
        p += shift * dt.itemsize
    if not p or not t.numel:
        return np.zeros(t.shape, dt)
    raw = (ctypes.c_char * max(buf.nbytes, 1)).from_address(p)
    base = np.frombuffer(raw, dtype=dt, count=buf.numel)
    off = (t.offset - root.type.offset) * dt.itemsize
    if buf.strides is not None:     # (a block strided in a cat's result: read whole)
        raw = (ctypes.c_char * max(whole.nbytes - shift * dt.itemsize, 1)).from_address(p)
        base = np.frombuffer(raw, dtype=dt)
        return np.array(np.lib.stride_tricks.as_strided(
            base, t.shape, tuple(s * dt.itemsize for s in buf.strides)))
    view = np.ndarray(t.shape, dt, buffer=base, offset=off,
                      strides=tuple(s * dt.itemsize for s in t.strides))
    return np.array(view)


# ---- naming and costing a group -----------------------------------------------------------
def group_ops(grp):
    ops = []
    for n in grp.members or [grp.root]:
        if not ops or ops[-1] != n.op:
            ops.append(n.op)
    return ops


def group_label(grp):
    """`g3 tanh+mul+sum (model.py:12-13)`: the group's ops and the user's lines."""
    ops = group_ops(grp)
    if len(ops) > 5:
        ops = ops[:4] + [f"...({len(ops) - 4} more)"]
    return f"g{grp.index} {'+'.join(ops)}{_lines(grp.members or [grp.root])}"


def _lines(nodes):
    by_file = {}
    for n in nodes:
        loc = short_loc(getattr(n, "loc", "") or "")
        f, _, line = loc.rpartition(":")
        if f and line.isdigit():
            by_file.setdefault(f, set()).add(int(line))
    if not by_file:
        return ""
    parts = []
    for f, lines in by_file.items():
        lines = sorted(lines)
        spans, start, prev = [], lines[0], lines[0]
        for x in lines[1:] + [None]:
            if x is not None and x == prev + 1:
                prev = x
                continue
            spans.append(f"{start}" if start == prev else f"{start}-{prev}")
            if x is not None:
                start = prev = x
        if len(spans) > 4:
            spans = spans[:3] + ["..."]
        parts.append(f"{f}:{','.join(spans)}")
    return " (" + "; ".join(parts) + ")"


def group_bytes(plan, grp):
    """Bytes a call of the group reads and writes (each value once)."""
    from ..codegen.schedule.plan import root_of
    total = 0
    for v in grp.leaves:
        buf = plan.buffers.get(root_of(v))
        n = v.type.nbytes if hasattr(v.type, "nbytes") else 0
        total += min(n, buf.nbytes) if buf is not None and buf.nbytes else n
    for v in grp.results:
        total += getattr(v.type, "nbytes", 0)
    return total


def group_flops(grp):
    """Floating-point operations of the group's matrix products (0 if it has none)."""
    flops = 0
    for n in grp.members or [grp.root]:
        k = MATMULS.get(n.op)
        if k is None:
            continue
        a = n.inputs[k]
        try:
            depth = a.type.shape[-1]
            flops += 2 * n.outputs[0].type.numel * depth
        except (AttributeError, IndexError):
            pass
    return flops
