"""A cold process's first build waits on LLVM as little as it must (codegen/native/
cold_start.py): the compile worker starts as a trace begins where the kernel cache is cold
(nothing of this host on disk), not when the build's first module asks for it, and the
support modules (thread pool, BLAS shims) are built during the trace, before the build
starts; the worker runs as `python -I -S` (no site, no .pth files); results are eager's; a
warm cache starts no worker at a trace; LLGRAD_TIMELINE=1 marks both processes' steps on one
clock."""
import threading

import numpy as np
import pytest

import llgrad
from llgrad.codegen.native import blas, cache, cold_start, host, jit, timeline, worker
from llgrad.codegen.kernel import Kernel
from llgrad.compile import background


@pytest.fixture
def cold(monkeypatch, tmp_path):
    """An empty kernel cache, no JIT, no worker; the timeline on (this process and the
    worker, which reads it from its environment when it starts)."""
    monkeypatch.setenv("LLGRAD_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("LLGRAD_TIMELINE", "1")
    monkeypatch.setattr(worker, "ENABLED", True)
    monkeypatch.setattr(timeline, "ENABLED", True)
    background.wait_all()
    cold_start._reset()
    worker._reset()
    jit._reset()
    cache._reset()
    blas._reset()           # (the shims: searched and built again, on this empty cache)
    timeline._reset()
    yield
    background.wait_all()
    cold_start._reset()
    worker._reset()
    monkeypatch.undo()
    jit._reset()
    cache._reset()
    blas._reset()
    timeline._reset()


def _step(x, w):
    return (llgrad.tanh(x @ w) * 2.0).sum()


def _inputs():
    rng = np.random.default_rng(0)      # (NumPy's draws: no eager kernel starts the worker)
    x = llgrad.tensor(rng.standard_normal((4, 8)).astype(np.float32))
    w = llgrad.tensor(rng.standard_normal((8, 3)).astype(np.float32), requires_grad=True)
    return x, w


def test_cold_trace_starts_the_worker_before_the_build(cold, monkeypatch):
    searched_on, search = [], blas._search

    def recorded():
        searched_on.append(threading.current_thread().name)
        return search()
    monkeypatch.setattr(blas, "_search", recorded)
    x, w = _inputs()
    f = llgrad.compile(_step)
    for _ in range(2):          # (the trace's call, then the one native code runs)
        w.grad = None
        loss = f(x, w)
        loss.backward()
        background.wait_all()   # (LLGRAD_COMPILE=background: the build on its thread)
    assert isinstance(f.entries[-1].kernels.get("forward"), Kernel)
    marks = [what for what, _ in timeline.marks()]
    assert marks[0] == "trace start" and marks[1] == "worker start", marks[:4]
    first_build = next(i for i, m in enumerate(marks) if m.startswith("build start"))
    assert marks.index("worker start") < first_build
    # the BLAS search and shims: on the support thread the trace started, once
    assert searched_on == ["llgrad-support-modules"], searched_on
    assert marks.count("generate llgrad_blas_shims") == 1, marks
    assert worker.stats["started"] == 1
    # the worker's own marks: up, llvmlite, LLVM, then requests, on the same clock
    theirs = worker.worker_timeline()
    names = [what for what, _ in theirs]
    assert names[:3] == ["worker python up", "worker llvmlite imported",
                         "worker llvm initialised"], names
    started = dict(timeline.marks())["worker start"]
    assert all(t >= started for _, t in theirs)
    # results: eager's
    got = w.grad.numpy().copy()
    w.grad = None
    want = _step(x, w)
    want.backward()
    np.testing.assert_allclose(loss.item(), want.item(), rtol=1e-5)
    np.testing.assert_allclose(got, w.grad.numpy(), rtol=1e-5, atol=1e-6)
    assert f.n_traces == 1


def test_warm_cache_starts_no_worker_at_a_trace(cold):
    # (the host's record, as the first build of this cache stores it: warm from here on)
    cache.store(host._key(host._cpuinfo_fingerprint()), host.ENTRY, b"{}", b"", b"")
    assert host.known()
    cold_start.trace_starts()
    assert not worker.running() and worker.stats["started"] == 0
    assert cold_start._state["thread"] is None      # (nor the support modules' search)


def test_worker_runs_isolated_without_site(cold):
    cmd = worker._command()
    assert cmd[1:3] == ["-I", "-S"], cmd
    assert worker.describe("1")["vector_bits"] in (128, 256, 512)
    with open(f"/proc/{worker._proc.pid}/cmdline", "rb") as fh:
        args = fh.read().split(b"\0")
    assert b"-I" in args and b"-S" in args
