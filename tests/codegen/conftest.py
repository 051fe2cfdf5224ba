"""The codegen tests exercise the thread pool's workers whatever else this machine runs:
the sampler that hands llgrad fewer CPUs while other processes keep them busy
(native/cpus.py) stays off here (test_cpu_watch.py tests it)."""
import os

os.environ.setdefault("LLGRAD_CPU_WATCH", "0")
