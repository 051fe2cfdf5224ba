"""Kernels from the caches only: while `probe()` is on (on this thread), a lookup that misses
the memory and disk caches, any code generation, and a lock held by a build on another thread
raise NotCached instead of building or waiting.

Why: eager kernels are built on the builder thread while NumPy's implementation serves
(compile/eager_builds.py), so the call at which native code takes over depended on that
thread's timing, and a seeded eager run's numbers could differ in the last bits from one
run to the next. A kernel already in the disk cache is loaded on the calling thread before
its first call instead (no LLVM: a load of its object file), so a warm process runs every
call on the same code from the first one; only a kernel built for the first time on this
machine still takes over mid-run."""
import threading
from contextlib import contextmanager

_state = threading.local()


class NotCached(BaseException):
    """A probe's miss. (A BaseException: the builds' own `except Exception` fallbacks, which
    warn and keep NumPy's implementation for good, must let it through.)"""


@contextmanager
def probe():
    """Inside: lookups raise NotCached rather than build or wait (this thread only)."""
    before = getattr(_state, "on", False)
    _state.on = True
    try:
        yield
    finally:
        _state.on = before


def probing():
    """Whether a probe is on in this thread."""
    return getattr(_state, "on", False)


def no_build():
    """Raise NotCached inside a probe: called where a miss would build code."""
    if getattr(_state, "on", False):
        raise NotCached


@contextmanager
def held(lock):
    """lock, acquired; inside a probe NotCached when another thread holds it (a build)."""
    if getattr(_state, "on", False):
        if not lock.acquire(blocking=False):
            raise NotCached
    else:
        lock.acquire()
    try:
        yield
    finally:
        lock.release()
