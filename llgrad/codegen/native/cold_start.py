"""A cold process's first build, started as its trace begins (backends.Native.trace_starts),
so that LLVM works during the trace instead of after it:

- the compile worker (worker.py) starts where nothing of this host is on disk (the host is
  not described in the kernel cache: a build follows for certain); its start-up (~0.25 s of
  CPU: Python, llvmlite, LLVM's initialisation) then overlaps the trace and the plan instead
  of waiting on the build's first request. A warm cache starts nothing here: its process
  may never need LLVM (elf.py loads the kernels).
- the modules every build links against first, the thread pool and the BLAS shims
  (blas.gemm_symbols: ~0.13 s of LLVM on a cold cache), are built on a thread of their own
  where LLVM is in use (the worker runs or is starting), rather than before the build's plan.
  The build's own search then finds them made (or waits on the search's lock for them):
  the same modules, the same machine code, only sooner."""
import threading

from . import blas, host, timeline, worker

_lock = threading.Lock()
_state = {"thread": None}


def trace_starts():
    timeline.mark("trace start")
    cold = worker.ENABLED and not worker.running() and not host.known()
    if cold:
        worker.prestart()
    if blas._found is not None or not (cold or worker.running()):
        return
    with _lock:
        thread = _state["thread"]
        if thread is None or not thread.is_alive():
            _state["thread"] = thread = threading.Thread(
                target=_support, name="llgrad-support-modules", daemon=True)
            thread.start()


def _support():
    try:
        blas.gemm_symbols()
    except Exception:       # noqa: BLE001 (the build searches again and meets it itself)
        pass


def wait():
    """Wait for the support modules' thread, if one runs (tests: nothing outlives them)."""
    thread = _state["thread"]
    if thread is not None:
        thread.join()


def _reset():
    wait()
    _state["thread"] = None
