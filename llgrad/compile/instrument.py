"""Timing compiled calls, for the profiler (profile.py) and the `perf` log channel.

Nothing here is on a call's path until someone asks: `activate` swaps in timed versions
of the few functions a compiled call goes through, and `deactivate` puts the originals
back, so with neither a profile nor LLGRAD_LOG=perf a call runs exactly the code it runs
without this module. While active:

    CompiledFunction.__call__   (class attribute)   an event per call: its own time is the
                                                    guard check and dispatch
    compiled_function.entry_runner                  the entry's runner (result tensors,
                                                    autograd node)
    CompiledFunction._trace_call                    a trace (and the conversion of the
                                                    function's source before it)
    each entry's kernels                            a copy of the Kernel whose native call
                                                    is timed: as a whole ("calls"), or
                                                    group by group ("groups", groupkernel.py)
    backends.on_build                               kernels built while active are timed too
    (profiles only) runtime.dispatch.run_impl / record, OpNode.apply: eager ops by name

Events nest (per thread); each has a total and a self time (total minus its children's),
so the self times of all events add up to the time spent inside them."""
import copy
import threading
import time

from ..runtime import dispatch, node
from . import backends
from . import compiled_function as _cf
from .groupkernel import GroupKernel, flag_raised, group_kernel

ns = time.perf_counter_ns

registry = _cf.registry        # every CompiledFunction (weakly): their entries get timed
_ORIG_CALL_FOR_TESTS = _cf.CompiledFunction.__call__    # (what "off" must leave in place)


class Event:
    __slots__ = ("name", "cat", "start", "dur", "self_ns", "tid", "meta")

    def __init__(self, name, cat, start, dur, self_ns, tid, meta):
        self.name, self.cat, self.start, self.dur = name, cat, start, dur
        self.self_ns, self.tid, self.meta = self_ns, tid, meta

    def __repr__(self):
        return f"<Event {self.cat} {self.name!r} {self.dur / 1e3:.1f} us>"


class _Local(threading.local):
    def __init__(self):
        self.stack = []         # children's time of the open events (ns), innermost last
        self.top = None         # {category: self ns} of the open top-level event


_local = _Local()
sinks = []                     # objects with .event(Event) (profiles; the perf logger)
_state = {"level": None, "eager": False}
_saved = {}                     # id(entry) -> [entry, {which: (kernel, run)}]
_patched = {}                   # (owner, name) -> original
_lock = threading.RLock()


def _record(name, cat, start, dur, child, meta=None):
    local = _local
    stack = local.stack
    if stack:
        stack[-1] += dur
    ev = Event(name, cat, start, dur, dur - child, threading.get_ident(), meta)
    top = local.top
    if top is not None:
        top[cat] = top.get(cat, 0) + ev.self_ns
    for sink in sinks:
        sink.event(ev)
    if not stack and top is not None:
        local.top = None
        for sink in sinks:
            sink.top(ev, top)


def _record_many(times, calls):
    """_record for the kernel groups of one launch, at once: [(start, ns)], [(_, name, _,
    meta)] (inside the launch's event: never top-level)."""
    tid = threading.get_ident()
    events = [Event(name, "kernel", t0, dur, dur, tid, meta)
              for (t0, dur), (_, name, _, meta) in zip(times, calls)]
    spent = sum(d for _, d in times)
    local = _local
    if local.stack:
        local.stack[-1] += spent
    if local.top is not None:
        local.top["kernel"] = local.top.get("kernel", 0) + spent
    for sink in sinks:
        extend = getattr(sink, "events_extend", None)
        if extend is not None:
            extend(events)
        else:
            for ev in events:
                sink.event(ev)


def _begin():
    local = _local
    if not local.stack:
        local.top = {}
    local.stack.append(0)
    return ns()


def _end(t0, name, cat, meta=None):
    t1 = ns()
    child = _local.stack.pop()
    _record(name, cat, t0, t1 - t0, child, meta)


def timed(fn, name, cat, meta=None):
    """fn, recording an event around each call."""
    def call(*args):
        t0 = _begin()
        try:
            return fn(*args)
        finally:
            _end(t0, name, cat, meta)
    call.__wrapped__ = fn
    return call


# ---- the swapped-in functions -------------------------------------------------------------------
def _timed_call(self, *args, **kwargs):
    t0 = _begin()
    try:
        return _patched[("CompiledFunction", "__call__")](self, *args, **kwargs)
    finally:
        _end(t0, f"{call_name(self)}: guards and dispatch", "call", self)


def call_name(cf):
    fn = cf.fn
    return getattr(fn, "__name__", None) or type(fn).__name__


def _timed_entry_runner(entry):
    run = _patched[(_cf, "entry_runner")](entry)
    return timed(run, f"{entry.name} forward: outputs and autograd node", "runner", entry)


def _timed_trace_call(self, *args, **kwargs):
    t0 = _begin()
    try:
        return _patched[("CompiledFunction", "_trace_call")](self, *args, **kwargs)
    finally:
        _end(t0, f"{call_name(self)}: trace", "compile")


def _timed_run_impl(op, inputs, attrs):
    t0 = _begin()
    try:
        return _patched[("dispatch", "run_impl")](op, inputs, attrs)
    finally:
        _end(t0, op.name, "eager")


def _timed_record(op, *args, **kwargs):
    t0 = _begin()
    try:
        return _patched[("dispatch", "record")](op, *args, **kwargs)
    finally:
        _end(t0, f"{op.name}: record grad_fn", "eager")


def _timed_apply(self, grads):
    t0 = _begin()
    try:
        return _patched[("OpNode", "apply")](self, grads)
    finally:
        _end(t0, type(self).__name__, "eager backward")


def _on_build(entry, which, run, seconds):
    """backends' hook: a graph built while active is timed from its first call (its build
    is an event; so is the build of its group wrappers, which a profile needs)."""
    with _lock:
        if _state["level"] is None:
            return run
        end = ns()
        _record(f"{entry.name} {which}: build", "compile", end - int(seconds * 1e9),
                int(seconds * 1e9), 0)
        t0 = ns()
        run = _instrument(entry, which, run)
        t1 = ns()
        if t1 - t0 > 100_000:
            _record(f"{entry.name} {which}: profiler's group kernels", "compile", t0,
                    t1 - t0, 0)
        return run


# ---- entries ------------------------------------------------------------------------------------
def _instrument(entry, which, run):
    """The timed run of entry's `which` graph (its kernel swapped for a timed copy); the
    originals are kept for deactivate()."""
    from ..codegen.kernel import Kernel      # (codegen loads llvmlite: on first use)
    rec = _saved.get(id(entry))
    if rec is None:
        rec = _saved[id(entry)] = [entry, {}]
    if which in rec[1]:
        return run
    kernel = entry.kernels.get(which)
    rec[1][which] = (kernel, run)
    entry._runners = {}             # (rebuilt from the timed kernel)
    label = f"{entry.name} {which}"
    if isinstance(kernel, Kernel):
        tk = timed_kernel(kernel, label, _state["level"] == "groups")
        entry.kernels[which] = tk
        if which == "forward":
            new = tk.run
        else:
            new = timed(backends.Native.backward_of(entry, tk),
                        f"{entry.name} backward: feeds", "runner", entry)
    else:
        what = "interpreted" if entry.backend.name != "python" else "python source"
        new = timed(run, f"{label} ({what})", "interpreted", entry)
    if which == "forward":
        entry._forward_run = new
    else:
        entry._backward_run = new
    return new


def timed_kernel(kernel, label, groups):
    """A copy of kernel whose native work is timed: group by group if `groups` (and the
    group wrappers could be built), else as one call; its launch is an event too."""
    gk = group_kernel(kernel) if groups else None
    if isinstance(gk, GroupKernel):
        calls = [(c.fn, f"{label} {c.label}", c.checks, c) for c in gk.calls]
        overhead = f"profiler: {label}'s {len(calls)} groups timed one by one"

        def native(addr):
            start = ns()
            times = []
            try:
                for fn, name, checks, meta in calls:
                    t0 = ns()
                    fn(addr)
                    times.append((t0, ns() - t0))
                    if checks and any(flag_raised(addr, s) for s in checks):
                        return
            finally:        # (the time between the groups is the profiler's, not the launch's)
                _record_many(times, calls)
                _record(overhead, "profiler", start,
                        ns() - start - sum(d for _, d in times), 0)
        k = gk.variant(native)
    else:
        k = copy.copy(kernel)
        k._pool = []
        k._pool.append(k._new_context())
        if k._tail is not None:
            k._tail = (_native_timed(k._tail[0], f"{label} kernel (tail)"),) + k._tail[1:]
        k._fn = _native_timed(kernel._native, f"{label} kernel")
    name = f"{label}: launch (checks, allocation)"
    k._launch = timed(k._launch, name, "launch")
    if k.launch_direct is not None:
        k.launch_direct = timed(k.launch_direct, name, "launch")
    return k


def _native_timed(fn, name):
    def native(addr):
        t0 = ns()
        fn(addr)
        _record(name, "kernel", t0, ns() - t0, 0)
    return native


def _instrument_existing():
    for cf in list(registry):
        cf._fast.clear()
        for entry in list(cf.entries):
            if entry._forward_run is not None:
                _instrument(entry, "forward", entry._forward_run)
            if entry._backward_run is not None:
                _instrument(entry, "backward", entry._backward_run)


def _restore_entries():
    for entry, whiches in _saved.values():
        for which, (kernel, run) in whiches.items():
            if kernel is not None:
                entry.kernels[which] = kernel
            if which == "forward":
                entry._forward_run = run
            else:
                entry._backward_run = run
        entry._runners = {}
    _saved.clear()
    for cf in list(registry):
        cf._fast.clear()


# ---- switching on and off -----------------------------------------------------------------------
def _patch(owner, key, name, new):
    if key not in _patched and hasattr(owner, name):     # (gone in a refactor: not timed)
        _patched[key] = getattr(owner, name)
        setattr(owner, name, new)


def _unpatch(owner, key, name):
    orig = _patched.pop(key, None)
    if orig is not None:
        setattr(owner, name, orig)


def _install(level, eager):
    _state["level"], _state["eager"] = level, eager
    _patch(_cf.CompiledFunction, ("CompiledFunction", "__call__"), "__call__", _timed_call)
    _patch(_cf, (_cf, "entry_runner"), "entry_runner", _timed_entry_runner)
    _patch(_cf.CompiledFunction, ("CompiledFunction", "_trace_call"), "_trace_call",
           _timed_trace_call)
    backends.on_build = _on_build
    if eager:
        _patch(dispatch, ("dispatch", "run_impl"), "run_impl", _timed_run_impl)
        _patch(dispatch, ("dispatch", "record"), "record", _timed_record)
        _patch(node.OpNode, ("OpNode", "apply"), "apply", _timed_apply)
    _instrument_existing()


def _uninstall():
    backends.on_build = None
    _unpatch(_cf.CompiledFunction, ("CompiledFunction", "__call__"), "__call__")
    _unpatch(_cf, (_cf, "entry_runner"), "entry_runner")
    _unpatch(_cf.CompiledFunction, ("CompiledFunction", "_trace_call"), "_trace_call")
    _unpatch(dispatch, ("dispatch", "run_impl"), "run_impl")
    _unpatch(dispatch, ("dispatch", "record"), "record")
    _unpatch(node.OpNode, ("OpNode", "apply"), "apply")
    _restore_entries()
    _state["level"], _state["eager"] = None, False


def _wanted(sinks):
    if not sinks:
        return None, False
    level = "groups" if any(s.level == "groups" for s in sinks) else "calls"
    return level, any(s.eager for s in sinks)


def activate(sink):
    """Start sending events to sink (.level "calls" or "groups", .eager, .event(ev),
    .top(ev, {category: self ns})): the instrumenting (and any group kernels it builds)
    happens before the sink sees events."""
    with _lock:
        _reconfigure(sinks + [sink])
        sinks.append(sink)


def deactivate(sink):
    with _lock:
        if sink in sinks:
            sinks.remove(sink)
        _reconfigure(sinks)


def _reconfigure(sinks):
    want = _wanted(sinks)
    have = (_state["level"], _state["eager"])
    if want == have:
        return
    if have[0] is not None:
        _uninstall()
    if want[0] is not None:
        _install(*want)


def active():
    return _state["level"] is not None


# ---- the perf log -------------------------------------------------------------------------------
def event_cost_ns(n=2000):
    """What timing one event costs (the profiler's footer reports it)."""
    saved, local = list(sinks), _local
    sinks[:] = []
    outer = local.stack, local.top
    local.stack, local.top = [0], None          # (as inside an event: no top-level logic)
    try:
        noop = timed(lambda: None, "calibration", "profiler")
        t0 = ns()
        for _ in range(n):
            noop()
        return (ns() - t0) / n
    finally:
        local.stack, local.top = outer
        sinks[:] = saved
