"""How long a waiting pool thread (pool.py) spins before it sleeps on its futex: SPIN_US
microseconds, LLGRAD_SPIN_US to choose another (0: sleep at once), `set_spin_us` at run
time. The pool's code counts pauses against the word `llgrad_pool_spins` (native/cpus.py);
`calibrate` sets it from a `pause` instruction's length, measured once a process when the
pool is built: 10 ns on one host seen, 40-50 ns on others, so a fixed count is a 5x
different time from host to host.

Why 1 ms: a worker woken from its futex sleep starts tens of microseconds late (a VM wakes
an idle vCPU through the hypervisor), and an eager step's Python runs 20-200 us between its
parallel loops and matrix products, a compiled step's a few between its kernels. A spin of
4096 pauses (42 us on the 10 ns host) left the worker asleep at nearly every one: an eager
transformer block's step (bench/real_models.py's block, 2 threads, 2-core host) took 8.6-9.2
ms with it and 7.3-8.1 ms with 0.6-2 ms of spin. PyTorch's OpenMP threads spin likewise
between parallel regions, and OpenBLAS's threads for up to 0.1-0.3 s after a product."""
import os
import time

from ..native import cpus

SPIN_US = 1000
_state = {"per_pause": None, "us": None}    # the pause's length; a length set before it


MAX_US = 10 ** 7        # (10 s: the count of pauses stays far inside the int64 word)


def spin_us_from_env():
    env = os.environ.get("LLGRAD_SPIN_US")
    try:
        return min(max(0, int(env)), MAX_US) if env else SPIN_US
    except ValueError:
        return SPIN_US


def pause_seconds(pause):
    """One `pause` instruction's length: the fastest of a few runs of 4096 (a run the OS
    interrupted only ever measures longer)."""
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        pause(4096)
        best = min(best, time.perf_counter() - t0)
    return max(best / 4096, 1e-10)


def calibrate(pause):
    """Measure the pause (pause(n): n of them, native code) and set the spin from the
    environment's length."""
    _state["per_pause"] = pause_seconds(pause)
    set_spin_us(spin_us_from_env() if _state["us"] is None else _state["us"])


def set_spin_us(us):
    """Spin `us` microseconds before sleeping, from the next wait on (no rebuild; before
    the pool is built, the length applies once it is)."""
    if isinstance(us, bool) or not isinstance(us, (int, float)) or not 0 <= us <= MAX_US:
        raise ValueError(f"set_spin_us: expected microseconds in [0, {MAX_US}], got {us!r}")
    _state["us"] = us
    if _state["per_pause"] is not None:
        cpus.spins.value = int(us * 1e-6 / _state["per_pause"])


def spin_us():
    """The spin's length now, in microseconds (None before the pool is built)."""
    per = _state["per_pause"]
    return None if per is None else cpus.spins.value * per * 1e6
