"""A kernel the caches already hold is loaded on the calling thread before its first eager
call (codegen/native/disk_only.py, compile/eager_builds.start): a warm process runs native
code from the first call, so its numbers do not depend on the builder thread's timing; a
kernel not in the caches is still built on the builder thread, NumPy serving meanwhile, and
a probe never waits for a lock a build holds."""
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import llgrad
from llgrad.codegen.native import cache, disk_only, jit
from llgrad.compile import eager_native

N = eager_native.MIN_ELEMENTS * 2 + 3


def _x():
    return llgrad.tensor(np.random.default_rng(0).standard_normal(N).astype(np.float32) * 3)


def test_a_cold_kernel_builds_in_the_background_then_a_cached_one_loads_at_the_first_call(
        cold_kernels):
    x = _x()
    first = x.sigmoid().numpy()
    assert eager_native.stats["calls"] == 0, "the first call waited for LLVM"
    eager_native.wait()
    assert eager_native.stats["built"] == 1
    native = x.sigmoid().numpy()
    assert eager_native.stats["calls"] == 1
    assert first.shape == native.shape
    eager_native.reset()                        # (the process forgets it: memory has it)
    again = x.sigmoid().numpy()
    assert eager_native.stats["calls"] == 1, "a kernel in memory waited for the builder"
    assert np.array_equal(again, native)
    eager_native.reset()
    jit._reset()                                # (now only the disk cache has it)
    before = jit.stats["loaded"]
    third = x.sigmoid().numpy()
    assert eager_native.stats["calls"] == 1 and jit.stats["loaded"] == before + 1
    assert np.array_equal(third, native)


def test_a_probe_misses_instead_of_building_or_waiting():
    lock = threading.Lock()
    with disk_only.probe():
        assert disk_only.probing()
        with pytest.raises(disk_only.NotCached):
            disk_only.no_build()
        lock.acquire()
        try:
            held = []
            t = threading.Thread(target=lambda: held.append(_try_in_probe(lock)))
            t.start()
            t.join(5)
            assert held == ["missed"]
        finally:
            lock.release()
    assert not disk_only.probing()
    disk_only.no_build()                        # (outside a probe: nothing happens)


def _try_in_probe(lock):
    with disk_only.probe():
        try:
            with disk_only.held(lock):
                return "got it"
        except disk_only.NotCached:
            return "missed"


_SEEDED_RUN = r"""
import numpy as np, llgrad
from llgrad.compile import eager_native
llgrad.manual_seed(0)
x = llgrad.randn(70000)
y = llgrad.nn.functional.gelu(x).sigmoid()
for _ in range(3):
    y = llgrad.nn.functional.silu(y * 1.5)
print(float(y.double().sum()).hex(), eager_native.stats["calls"])
"""


@pytest.mark.slow      # (three processes)
def test_warm_processes_give_the_same_bits_from_the_first_call(tmp_path):
    """A process that built the kernels (sync: a short script's background builds may not
    finish before it exits) leaves them on disk; later processes in the default mode run
    them from the first call and print its bits exactly."""
    env = dict(os.environ, LLGRAD_CACHE_DIR=str(tmp_path), LLGRAD_COMPILE="sync")
    runs = [subprocess.run([sys.executable, "-c", _SEEDED_RUN], capture_output=True,
                           text=True, timeout=300, env=dict(env, LLGRAD_COMPILE=mode))
            for mode in ("sync", "background", "background")]
    for r in runs:
        assert r.returncode == 0, r.stderr[-2000:]
    outs = [r.stdout.split() for r in runs]
    assert outs[0][1] == "5" and outs[1] == outs[2] == outs[0], outs


_COLD_HOST = r"""
import sys, llgrad
from llgrad.codegen.native import jit
from llgrad.compile import eager_builds
eager_builds._build_loop = lambda q: None       # (no builder thread: nothing builds)
x = llgrad.randn(70000)
x.sigmoid()
print(jit.made(), "llvmlite.binding" in sys.modules)
"""


def test_a_first_call_on_an_empty_cache_leaves_llvm_to_the_builder(tmp_path):
    """On a machine whose host is not described in the cache yet, the caller's look into
    the caches asks nothing of LLVM (describing the host is the builder thread's work)."""
    env = dict(os.environ, LLGRAD_CACHE_DIR=str(tmp_path), LLGRAD_COMPILE="background",
               LLGRAD_COMPILE_WORKER="0")
    out = subprocess.run([sys.executable, "-c", _COLD_HOST], capture_output=True, text=True,
                         timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["False", "False"], out.stdout
