"""Eager native kernels on llgrad's threads: eager_native.py's elementwise loops, their
backward loops and the softmax rows run as chunks on the thread pool (codegen/eager_split.py)
when llgrad runs more than one thread and the call has MIN_CHUNK elements for each chunk,
at most OVERSPLIT chunks a thread (a worker that wakes late leaves its chunks to the
caller, which takes them one at a time). Results are bitwise those of one call on one
thread (chunk bounds keep every element on the instructions it had: eager_split.py).

The splitter is built (or loaded from the disk cache) on the first call that wants it, as an
eager kernel is (eager_builds.py: one call on the calling thread meanwhile);
LLGRAD_EAGER_NATIVE=0 turns it off with the rest. `stats` counts split calls."""
import ctypes

from . import eager_builds

MIN_CHUNK = 16384           # elements a chunk at least (~10-30 us of GELU's loop here)
OVERSPLIT = 2
ALIGN = 64                  # elements: chunk bounds of the elementwise loops (eager_split.py)
_state = {}                 # "split" -> {(pointers, extra): ctypes function} | None | PENDING
_count = []                 # threadcount's word (imported on the first big call: it loads
                            # llvmlite, which `import llgrad` does not)
stats = {"calls": 0}


def reset():
    eager_builds.wait()
    _state.clear()
    stats["calls"] = 0


def _load():
    from ..codegen import eager_split
    from ..codegen.lowerings.pool import ensure_pool
    try:
        ensure_pool()
        lib = eager_split.build()
    except Exception:       # noqa: BLE001 (an unusual platform: one thread serves)
        return None
    fns = {"code": lib}     # (the code lives as long as the pointers into it)
    proto = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, *([ctypes.c_int64] * 5))
    for p in range(1, eager_split.MAX_POINTERS + 1):
        for e in (0, 1):
            fns[(p, e)] = proto(lib.address(eager_split.name(p, e)))
    return fns


def chunks(elements):
    """How many chunks a call over this many elements runs as (1: the caller runs the kernel
    itself)."""
    if elements < 2 * MIN_CHUNK:
        return 1
    if not _count:
        from ..codegen.native import threadcount
        _count.append(threadcount._count)
    n = _count[0].value
    return 1 if n < 2 else min(n * OVERSPLIT, elements // MIN_CHUNK)


def run(kernel, pointers, units, unit_bytes, extra=None, align=ALIGN, t=None):
    """kernel(*pointers, units[, extra]) as t chunks of its units on the pool; False where it
    did not run (the splitter is not built yet, or cannot be: the caller calls kernel)."""
    fns = _state.get("split", False)
    if fns is False:
        fns = eager_builds.start(_state, "split", _load)
    if fns is None or fns is eager_builds.PENDING:
        return False
    fn = fns.get((len(pointers), 0 if extra is None else 1))
    if fn is None:
        return False
    ptrs = (ctypes.c_void_p * len(pointers))(*pointers)
    fn(int(kernel), ctypes.addressof(ptrs), units, unit_bytes, extra or 0, align, t)
    stats["calls"] += 1
    return True


def elementwise(found, pointers, n, itemsize):
    """An elementwise loop (found: (ctypes function, address)) over n elements."""
    t = chunks(n)
    if t < 2 or not run(found[1], pointers, n, itemsize, t=t):
        found[0](*pointers, n)


def rows(found, pointers, n_rows, n, itemsize):
    """A loop over n_rows rows of n elements (softmax's)."""
    t = min(chunks(n_rows * n), n_rows)
    if t < 2 or not run(found[1], pointers, n_rows, n * itemsize, extra=n, align=1, t=t):
        found[0](*pointers, n_rows, n)
