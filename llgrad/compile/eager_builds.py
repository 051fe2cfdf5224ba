"""The builder thread of the eager kernels (eager_native.py's ops and their backwards,
eager_softmax.py's rows, eager_optim.py's updates): a kernel is built on the first call that
wants it, on this thread, while that call and the next ones run NumPy's implementation;
LLGRAD_COMPILE=sync builds on the calling thread instead, before the call. A kernel the
memory or disk cache holds is loaded on the calling thread before its first call, in either
mode (codegen/native/disk_only.py: a warm process gives the same numbers every run).
`wait()` waits for the builds queued so far.

No build starts while a trace runs ops (their shapes are the traced call's, which the
compiled code runs from then on), while a call stands in for compiled code being built
(run.StandIn: the compiled code will run those ops; a build for them would only compete
with its build; kernels the memory or disk cache holds are still loaded for it, so its
products are the compiled code's), or while `paused()` (a compiled function's first step,
run eagerly once): those calls run NumPy's implementation, kernels ready are used."""
import os
import queue
import threading
from contextlib import contextmanager

from ..runtime import trace_state
from . import background

PENDING = "pending"     # a kernel's entry while its build is queued or under way
_builder = {"queue": None, "thread": None}
_unfinished = [0]       # builds queued and not done (wait())
_done = threading.Condition()
_tables = {}            # id -> every table a build was started for (their PENDING entries)
_paused = threading.local()
# (table id, key) the disk cache did not have when a call standing in for compiled code
# probed it: such calls queue no build, so probing again at each of them (a lookup, and for
# a VJP a trace of its rule) would only slow the calls that stand in for the build
_absent = set()


def absent(table, key):
    """Whether a call standing in for compiled code found table[key] not cached before."""
    return trace_state.state.standing_in and (id(table), key) in _absent


def reset():
    """Forget which kernels standing-in calls found absent (a later one probes again)."""
    _absent.clear()


@contextmanager
def paused():
    """No build starts on this thread inside the block."""
    before = getattr(_paused, "on", False)
    _paused.on = True
    try:
        yield
    finally:
        _paused.on = before


def wait():
    """Wait for the kernel builds queued so far."""
    with _done:
        _done.wait_for(lambda: _unfinished[0] == 0)


def start(table, key, build):
    """Fill table[key] with build() (a kernel or None): now under LLGRAD_COMPILE=sync (or
    on the builder thread itself) or where the memory or disk cache has the code (loaded on
    this thread: a warm process runs native code from the first call, the same each run),
    else on the builder thread, the entry PENDING meanwhile. Returns what the caller runs
    now: the kernel, or None for NumPy's implementation."""
    if trace_state.state.tracer is not None or getattr(_paused, "on", False):
        return None             # (table[key] stays unset: a later call starts the build)
    if os.environ.get("LLGRAD_COMPILE", "background") == "sync" or \
            threading.current_thread() is _builder["thread"]:
        table[key] = build()
        return table[key]
    standing_in = trace_state.state.standing_in
    if absent(table, key):
        return None
    from ..codegen.native import disk_only     # (codegen: on a kernel's first call only)
    try:
        with disk_only.probe():
            found = build()
        table[key] = found
        return found
    except disk_only.NotCached:
        pass
    if standing_in:     # (found kernels serve it: the compiled code's bits)
        _absent.add((id(table), key))
        return None
    _absent.discard((id(table), key))
    _tables[id(table)] = table
    table[key] = PENDING
    with _done:
        _unfinished[0] += 1
    q = _builder["queue"]
    if q is None:
        q = _builder["queue"] = queue.SimpleQueue()
        t = _builder["thread"] = threading.Thread(target=_build_loop, args=(q,), daemon=True,
                                                  name="llgrad-eager-kernels")
        t.start()
    q.put((table, key, build))
    return None


def _build_loop(q):
    while True:
        table, key, build = q.get()
        background.quick_switches(True)     # (the caller gets the GIL back sooner)
        try:
            table[key] = build()
        except Exception:               # noqa: BLE001 (build() warns itself; NumPy serves)
            table[key] = None
        finally:
            background.quick_switches(False)
            with _done:
                _unfinished[0] -= 1
                _done.notify_all()
        del table, key, build


def _after_fork_in_child():
    """The parent's builder thread is not in the child: its pending builds start again."""
    global _done
    _done, _unfinished[0] = threading.Condition(), 0
    _absent.clear()
    _builder["queue"] = _builder["thread"] = None
    for table in _tables.values():
        for k in [k for k, v in table.items() if v is PENDING]:
            del table[k]


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
