"""The words native code shares with this process about threads: the thread count
(`llgrad_num_threads`, an int64 every parallel loop and the BLAS shims read at run time,
so `set_num_threads` never recompiles and cached object code keeps working), the name of
the fork-join entry point kernels call (`llgrad_parallel_run`, provided by
lowerings/pool.py), and private names for pthread_create/join (generated code never binds
to whatever else defines pthread_* in the JIT). The count's default is LLGRAD_NUM_THREADS,
else the CPUs this process may run on."""
import ctypes
import operator
import os
import warnings

from . import jit

COUNT, RUN = "llgrad_num_threads", "llgrad_parallel_run"
PTHREAD_CREATE, PTHREAD_JOIN = "llgrad_pthread_create", "llgrad_pthread_join"


def _validate(n):
    # ValueError for every bad value, types included: one error to catch, as asked of the API
    if isinstance(n, bool):
        raise ValueError(f"set_num_threads: expected an int >= 1, got {n!r}")  # noqa: TRY004
    try:
        n = operator.index(n)
    except TypeError:
        raise ValueError(f"set_num_threads: expected an int >= 1, got {n!r}") from None
    if n < 1:
        raise ValueError(f"set_num_threads: expected an int >= 1, got {n}")
    return n


def _default_threads():
    env = os.environ.get("LLGRAD_NUM_THREADS")
    if env:
        try:
            return _validate(int(env))
        except ValueError:
            warnings.warn(f"llgrad: ignoring LLGRAD_NUM_THREADS={env!r} (not an int >= 1)",
                          RuntimeWarning, stacklevel=2)
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    return max(1, n)


_count = ctypes.c_int64(_default_threads())     # read by native code: lives forever
DEFAULT = _count.value      # (the count before any set_num_threads: compile/settings.py)
jit.add_symbol(COUNT, ctypes.addressof(_count))


def set_num_threads(n):
    """The number of threads native loops use (an int >= 1); takes effect at the next call
    of any compiled function, without recompiling."""
    _count.value = _validate(n)


def get_num_threads():
    return _count.value


def libc_function(name):
    """The address of a C library function."""
    for lib in (None, "libpthread.so.0", "libc.so.6"):
        try:
            return ctypes.cast(getattr(ctypes.CDLL(lib), name), ctypes.c_void_p).value
        except (OSError, AttributeError):
            continue
    raise ImportError(f"llgrad: cannot find {name} in the C library")


jit.add_symbol(PTHREAD_CREATE, libc_function("pthread_create"))
jit.add_symbol(PTHREAD_JOIN, libc_function("pthread_join"))
