"""The codegen tests exercise the thread pool's workers whatever else this machine runs:
the sampler that hands llgrad fewer CPUs while other processes keep them busy
(native/cpus.py) stays off here (test_cpu_watch.py tests it)."""
import os

os.environ.setdefault("LLGRAD_CPU_WATCH", "0")

import pytest  # noqa: E402


@pytest.fixture
def two_threads():
    """llgrad on 2 threads for the test, its count before put back after."""
    import llgrad
    old = llgrad.get_num_threads()
    llgrad.set_num_threads(2)
    yield
    llgrad.set_num_threads(old)
