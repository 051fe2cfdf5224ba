"""Two words that native code shares about the CPUs, published to the JIT like the BLAS
symbols: `llgrad_cpus`, the CPUs this process may run on, and `llgrad_active_threads`, how
many threads are running llgrad's native code at this moment: callers inside a kernel (the
trampoline counts them in and out, trampoline.py), pool workers running chunks of a loop
(lowerings/pool.py), and the extra threads of a threaded BLAS call (blas.py).

The thread pool hands a chunk to a worker only while active < cpus (else the caller runs
it), and its threads spin while they wait only when a CPU is free (else they sleep), so
concurrent callers share the CPUs instead of oversubscribing them. In a forked child the
count restarts at 0 (the parent's other threads are not there)."""
import ctypes
import os

from . import jit

ACTIVE, CPUS = "llgrad_active_threads", "llgrad_cpus"

_buf = ctypes.create_string_buffer(3 * 64)       # (lives as long as the module)
_base = -(-ctypes.addressof(_buf) // 64) * 64    # each word on a cache line of its own
active = ctypes.c_int64.from_address(_base)
cpus = ctypes.c_int64.from_address(_base + 64)


def cpu_count():
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


cpus.value = cpu_count()
jit.add_symbol(ACTIVE, _base)
jit.add_symbol(CPUS, _base + 64)


def declare(mod):
    """(active, cpus): the module's declarations of the two words (external i64s)."""
    from llvmlite import ir
    out = []
    for name in (ACTIVE, CPUS):
        g = mod.globals.get(name)
        if g is None:
            g = ir.GlobalVariable(mod, ir.IntType(64), name=name)   # (external)
            g.type = ir.PointerType()   # (printed as the opaque `ptr` LLVM has)
        out.append(g)
    return tuple(out)


def _after_fork_in_child():
    active.value = 0
    cpus.value = cpu_count()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
