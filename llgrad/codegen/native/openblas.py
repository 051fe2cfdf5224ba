"""NumPy's OpenBLAS, found with ctypes and nothing else (no llvmlite: `import llgrad` uses
it): its thread-count setter (where the library is: ir/blas_trsm.py).

`pin_from_env()` runs at `import llgrad`: LLGRAD_NUM_THREADS=n pins NumPy's OpenBLAS (what
eager matmuls run on) to n threads as set_num_threads(n) does, unless OPENBLAS_NUM_THREADS
says otherwise. Unpinned, an eager matmul of 128x64 by 64x192 took 0.04 ms on one thread
and 0.1-16 ms on OpenBLAS's two while another process used the second core (its worker
waits to be scheduled): a process told to use one thread must not start a second."""
import ctypes
import os

from ...ir.blas_trsm import libraries

GETTERS = ("scipy_openblas_get_num_threads64_", "openblas_get_num_threads64_",
           "openblas_get_num_threads")
SETTERS = ("scipy_openblas_set_num_threads64_", "openblas_set_num_threads64_",
           "openblas_set_num_threads")


def thread_setter():
    """OpenBLAS's set_num_threads as a ctypes function of an int, or None."""
    for path in libraries():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for sym in SETTERS:
            fn = getattr(lib, sym, None)
            if fn is not None:
                fn.argtypes = [ctypes.c_int]
                return fn
    return None


def pin_from_env():
    """Apply LLGRAD_NUM_THREADS to OpenBLAS (see the module); quietly nothing when the
    value is not an int >= 1 (threadcount.py warns about it) or OPENBLAS_NUM_THREADS is
    set."""
    env = os.environ.get("LLGRAD_NUM_THREADS", "")
    if not env or os.environ.get("OPENBLAS_NUM_THREADS"):
        return
    try:
        n = int(env)
    except ValueError:
        return
    if n >= 1:
        setter = thread_setter()
        if setter is not None:
            setter(n)
