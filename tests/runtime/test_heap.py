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
