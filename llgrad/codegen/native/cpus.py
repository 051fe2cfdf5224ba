"""Two words that native code shares about the CPUs, published to the JIT like the BLAS
symbols: `llgrad_cpus`, the CPUs this process may use now (see below), and
`llgrad_active_threads`, how many threads are running llgrad's native code at this
moment: callers inside a kernel (the trampoline counts them in and out, trampoline.py),
pool workers running chunks of a loop (lowerings/pool.py), and the extra threads of a
threaded BLAS call (blas.py).

The thread pool hands a chunk to a worker only while active < cpus (else the caller runs
it), and its threads spin while they wait only when a CPU is free (else they sleep), so
concurrent callers share the CPUs instead of oversubscribing them. In a forked child the
count restarts at 0 (the parent's other threads are not there).

The CPUs this process may use now: those it may run on, less those other processes keep
busy. On a shared machine a worker handed a chunk while another process holds its CPU
waits for a time slice (milliseconds), and the caller waits for it at the join: on this
2-core machine with two other test runs busy, 2 threads made a 2048x27x16 product 5x and
a transformer block's step 1.2x slower than 1 thread (issue 20). So, once a threaded
kernel has been built (`watch`), a daemon thread samples every SAMPLE_S seconds, while
the thread count is above 1, the threads of other processes that are runnable
(/proc/stat's procs_running less this process's threads in state R: its own threads are
no reason to hold back; CPU time would not do, as it is what the others got, not what
they wanted); smoothed, that is the others' load, and `llgrad_cpus` = max(1, round(CPUs
- load)). A loop then posts chunks to workers only while one of those CPUs is free (else
the caller runs them all: 2 threads cost no more than 1), and workers stop spinning.
GNU OpenMP's OMP_DYNAMIC decides from the load average likewise. The chunks depend on the
thread count only, never on the sample: results do not change with the load.
LLGRAD_CPU_WATCH=0 turns the sampling off (the word is then the CPUs this process may
run on)."""
import ctypes
import os
import threading
import time

from . import jit

ACTIVE, CPUS, SPINS = "llgrad_active_threads", "llgrad_cpus", "llgrad_pool_spins"

_buf = ctypes.create_string_buffer(4 * 64)       # (lives as long as the module)
_base = -(-ctypes.addressof(_buf) // 64) * 64    # each word on a cache line of its own
active = ctypes.c_int64.from_address(_base)
cpus = ctypes.c_int64.from_address(_base + 64)
# how many `pause` instructions a pool thread spins before it sleeps (lowerings/pool.py sets
# it from the pause's measured length: 10 ns on one host seen, 40-50 ns on others)
spins = ctypes.c_int64.from_address(_base + 128)
spins.value = 4096


def cpu_count():
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


cpus.value = cpu_count()
jit.add_symbol(ACTIVE, _base)
jit.add_symbol(CPUS, _base + 64)
jit.add_symbol(SPINS, _base + 128)


def declare(mod, names=(ACTIVE, CPUS)):
    """(active, cpus[, spins]): the module's declarations of the words (external i64s)."""
    from llvmlite import ir
    out = []
    for name in names:
        g = mod.globals.get(name)
        if g is None:
            g = ir.GlobalVariable(mod, ir.IntType(64), name=name)   # (external)
            g.type = ir.PointerType()   # (printed as the opaque `ptr` LLVM has)
        out.append(g)
    return tuple(out)


SAMPLE_S = 0.05                 # seconds between samples of /proc/stat
RISE, FALL = 0.3, 0.7           # weight of the newest sample when the load rises / falls:
                                # a CPU others free is taken back within two samples (with
                                # one weight for both, a process that alternates with another,
                                # a benchmark's peer or a data loader, stayed on 1 thread
                                # through 0.3 s blocks after the other's had ended)
_watch = {"thread": None, "load": 0.0}
_watch_lock = threading.Lock()


def _running_others():
    """Threads of other processes runnable now (/proc/stat's procs_running less this
    process's threads in state R), or None where /proc does not say."""
    try:
        with open("/proc/stat", "rb") as f:
            running = next((int(ln.split()[1]) for ln in f if ln.startswith(b"procs_running")),
                           None)
        if running is None:
            return None
        ours = 0
        for tid in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{tid}/stat", "rb") as f:
                    ours += f.read().rsplit(b")", 1)[1].split()[0] == b"R"
            except OSError:
                continue
    except (OSError, ValueError, IndexError):
        return None
    return max(0, running - ours)


def _effective(n, load):
    return max(1, min(n, int(n - load + 0.5)))


def _sampler():
    from .threadcount import get_num_threads
    while True:
        if get_num_threads() < 2:       # (nothing to decide: no loop forks)
            time.sleep(SAMPLE_S)
            continue
        others = _running_others()
        if others is None:
            break
        w = RISE if others > _watch["load"] else FALL
        load = _watch["load"] = (1 - w) * _watch["load"] + w * others
        cpus.value = _effective(cpu_count(), load)
        time.sleep(SAMPLE_S)


def watch():
    """Start the sampler (once per process; idempotent and cheap after the first call)."""
    if _watch["thread"] is not None or os.environ.get("LLGRAD_CPU_WATCH", "1") == "0":
        return
    with _watch_lock:
        if _watch["thread"] is not None or cpu_count() < 2 or _running_others() is None:
            return
        t = threading.Thread(target=_sampler, name="llgrad-cpu-watch", daemon=True)
        t.start()
        _watch["thread"] = t


def _after_fork_in_child():
    active.value = 0
    cpus.value = cpu_count()
    _watch["thread"], _watch["load"] = None, 0.0
    _watch_lock._at_fork_reinit()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
