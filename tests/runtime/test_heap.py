"""llgrad keeps a step's freed memory for the next step (runtime/heap.py): a pattern that
frees many MB at once and allocates them again faults its pages in again under glibc's
defaults, and does not with llgrad imported."""
import os
import platform
import subprocess
import sys
import textwrap

import pytest

import llgrad
from llgrad.runtime import heap

glibc = pytest.mark.skipif(not sys.platform.startswith("linux")
                           or platform.libc_ver()[0] != "glibc", reason="glibc's malloc")

# thirty 1 MiB arrays alive at once, then all freed: a step's activations
STEPS = textwrap.dedent("""
    import resource, numpy as np
    IMPORT
    def step():
        xs = [np.ones(1 << 18, np.float32) for _ in range(30)]
        return sum(float(x[0]) for x in xs)
    step(); step()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(5):
        step()
    print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) // 5)
""")


def _faults_per_step(with_llgrad):
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLGRAD_")}
    code = STEPS.replace("IMPORT", "import llgrad" if with_llgrad else "")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120, check=True)
    return int(out.stdout.split()[-1])


@glibc
def test_freed_steps_are_not_faulted_in_again():
    kept, default = _faults_per_step(True), _faults_per_step(False)
    assert default > 30 * 256 // 2            # glibc's defaults: most pages faulted again
    assert kept < 100, (kept, default)


def test_setting_reads_the_environment(monkeypatch):
    monkeypatch.setenv("LLGRAD_HEAP_KEEP_MB", "12")
    assert heap.keep_mb_setting() == 12
    monkeypatch.delenv("LLGRAD_HEAP_KEEP_MB")
    assert heap.keep_mb_setting() == heap.DEFAULT_KEEP_MB
    for bad in ("-1", "lots"):
        monkeypatch.setenv("LLGRAD_HEAP_KEEP_MB", bad)
        with pytest.warns(RuntimeWarning, match="LLGRAD_HEAP_KEEP_MB"):
            assert heap.keep_mb_setting() == heap.DEFAULT_KEEP_MB


def test_zero_changes_nothing():
    assert heap.keep_freed_memory(0) is False
    assert llgrad.tensor([1.0, 2.0]).sum().item() == 3.0


# small blocks (under the mmap threshold) freed among live ones: a trace's temporaries
TRIM = textwrap.dedent("""
    import numpy as np
    import llgrad
    from llgrad.runtime import heap
    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4096 >> 20
    keep, temps = [], []
    for i in range(20000):
        temps.append(np.ones(1000, np.float32))     # 4 KB each, 80 MB in all
        if i % 8 == 0:
            keep.append(np.ones(8, np.float32))
    del temps
    before = rss()
    heap.release_freed()
    print(before, rss())
""")


@glibc
def test_release_freed_hands_free_pages_back():
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLGRAD_")}
    out = subprocess.run([sys.executable, "-c", TRIM], env=env, capture_output=True,
                         text=True, timeout=120, check=True)
    before, after = map(int, out.stdout.split())
    assert before - after > 40, (before, after)     # (kept by llgrad's heap setting till now)


def test_a_compile_releases_after_its_trace_and_its_build(monkeypatch):
    calls = []
    monkeypatch.setattr(heap, "release_freed", lambda: calls.append(1))
    monkeypatch.setenv("LLGRAD_COMPILE", "sync")
    f = llgrad.compile(lambda x: (x * 3).sin().sum())
    x = llgrad.randn(64, requires_grad=True)
    for _ in range(3):
        f(x).backward()
    assert len(calls) >= 3      # the trace, the forward's build, the backward's
    n = len(calls)
    f(x).backward()             # (a compiled call: nothing to release)
    assert len(calls) == n
