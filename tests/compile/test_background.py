"""Native code built in the background (llgrad/compile/background.py): calls never wait for
LLVM, run on the interpreter until the code is ready, switch to it, and give eager's
results throughout; a failed build falls back to the interpreter with a warning;
LLGRAD_COMPILE=sync builds before the call."""
import os
import threading
import warnings

import numpy as np
import pytest

import llgrad
import llgrad.nn as nn
from llgrad.codegen import lower as lower_module
from llgrad.compile import background


@pytest.fixture
def in_background(monkeypatch, tmp_path):
    monkeypatch.setenv("LLGRAD_COMPILE", "background")
    monkeypatch.setenv("LLGRAD_CACHE_DIR", str(tmp_path / "cache"))   # (no hints yet)


def _model():
    llgrad.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))


def _train(model, step, n, between=None):
    opt = llgrad.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    rng = np.random.default_rng(1)
    losses = []
    for k in range(n):
        x = llgrad.tensor(rng.standard_normal((8, 6)).astype(np.float32))
        y = llgrad.tensor(rng.integers(0, 3, 8))
        losses.append(step(model, opt, x, y))
        if between is not None:
            between(k)
    return losses, [p.detach().numpy().copy() for p in model.parameters()]


def _step(model, opt, x, y):
    opt.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss.item()


def _forward_loss(model, x, y):
    return nn.functional.cross_entropy(model(x), y)


def test_results_equal_eager_before_and_after_the_switch(in_background):
    """A training loop whose forward and backward start on the interpreter and switch to
    native code midway gives eager's losses and parameters at every step."""
    want_losses, want_params = _train(_model(), _step, 6)
    fn = llgrad.compile(_forward_loss)
    entries = []

    def step(model, opt, x, y):
        opt.zero_grad()
        loss = fn(model, x, y)
        loss.backward()
        opt.step()
        return loss.item()

    def between(k):
        if k == 2:              # the build finishes here: native code from step 4 on
            entries.extend(fn.entries)
            for e in fn.entries:
                background.wait(e)
    losses, params = _train(_model(), step, 6, between)
    np.testing.assert_allclose(losses, want_losses, rtol=1e-5, atol=1e-6)
    for p, q in zip(params, want_params):
        np.testing.assert_allclose(p, q, rtol=1e-5, atol=1e-6)
    (entry,) = entries
    assert entry.kernels["forward"] is not None and entry.kernels["backward"] is not None
    assert entry._forward_run is not entry._interim_runs.get("forward")


def test_a_call_never_waits_for_llvm(in_background, monkeypatch):
    """While the build is held up, calls complete (on the interpreter) with eager's
    results; released, the next calls run native code."""
    release = threading.Event()
    real_lower = lower_module.lower

    def held_lower(graph, **kw):
        assert release.wait(60), "the test never released the build"
        return real_lower(graph, **kw)
    monkeypatch.setattr(lower_module, "lower", held_lower)

    def f(x, w):
        return ((x @ w).tanh() * 2).sum(0)
    fn = llgrad.compile(f)
    x, w = llgrad.randn(5, 4), llgrad.randn(4, 3)
    for _ in range(4):                  # the trace, then three calls while LLVM is held
        np.testing.assert_allclose(fn(x, w).numpy(), f(x, w).numpy(), rtol=1e-6)
    (entry,) = fn.entries
    assert "forward" not in entry.kernels         # still being built
    release.set()
    fn.wait()                           # (the public way: every entry's build)
    np.testing.assert_allclose(fn(x, w).numpy(), f(x, w).numpy(), rtol=1e-6)
    assert entry.kernels["forward"] is not None
    assert entry._forward_run is not entry._interim_runs.get("forward")


def test_a_failed_build_runs_on_the_interpreter_with_a_warning(in_background, monkeypatch):
    def broken_lower(graph, **kw):
        raise RuntimeError("LLVM ran out of luck")
    monkeypatch.setattr(lower_module, "lower", broken_lower)

    def f(x):
        return (x.exp() + 1).log().mean()
    fn = llgrad.compile(f)
    x = llgrad.randn(7, requires_grad=True)
    fn(x).backward()                    # the trace; the build starts
    background.wait(fn.entries[0])
    x.grad = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = fn(x)
        got.backward()
    assert any("building native code failed" in str(w.message) and "out of luck"
               in str(w.message) for w in caught), [str(w.message) for w in caught]
    want = llgrad.tensor(x.detach().numpy(), requires_grad=True)
    f(want).backward()
    np.testing.assert_allclose(got.item(), f(want).item(), rtol=1e-6)
    np.testing.assert_allclose(x.grad.numpy(), want.grad.numpy(), rtol=1e-6)


def test_graphs_compiled_before_load_before_the_call(in_background):
    """A graph a process sharing the disk cache compiled before (a hint there) is loaded
    before the call, not built in the background while the call runs eagerly."""
    def f(x):
        return (x * 2 + 1).tanh().sum()
    first = llgrad.compile(f)
    x = llgrad.randn(33)
    first(x)
    background.wait(first.entries[0])
    again = llgrad.compile(f)           # (a new process would start like this)
    again(x)
    out = again(x)
    (entry,) = again.entries
    assert entry._build_job is None and entry.kernels["forward"] is not None
    np.testing.assert_allclose(out.item(), f(x).item(), rtol=1e-6)


def test_sync_builds_before_the_call_returns(monkeypatch):
    monkeypatch.setenv("LLGRAD_COMPILE", "sync")
    fn = llgrad.compile(lambda x: (x * 3).sin())
    x = llgrad.randn(9)
    fn(x)
    fn(x)
    (entry,) = fn.entries
    assert entry._build_job is None and entry.kernels["forward"] is not None


def test_other_backends_never_build_in_the_background(in_background):
    fn = llgrad.compile(lambda x: x + 1, backend="interpret")
    fn(llgrad.ones(3))
    fn(llgrad.ones(3))
    assert fn.entries[0]._build_job is None


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_child_forked_during_a_build_builds_its_own(in_background, monkeypatch):
    """A build under way in the parent at fork never finishes in the child (no worker
    there): the child queues it again and still gets eager's results."""
    release = threading.Event()
    real_lower = lower_module.lower
    monkeypatch.setattr(lower_module, "lower",
                        lambda graph, **kw: (release.wait(60), real_lower(graph, **kw))[1])
    fn = llgrad.compile(lambda x: (x * x).sum())
    x = llgrad.arange(6.0)
    fn(x)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:                        # the child: the parent's worker is gone
        os.close(r)
        ok = False
        try:
            release.set()               # (the child's own builds are not held)
            out = fn(x).item()
            background.wait(fn.entries[0])
            ok = out == 55.0 and fn(x).item() == 55.0 and \
                fn.entries[0].kernels.get("forward") is not None
        finally:
            os.write(w, b"1" if ok else b"0")
            os._exit(0)
    os.close(w)
    try:
        got = os.read(r, 1)
    finally:
        os.close(r)
        release.set()
        os.waitpid(pid, 0)
    assert got == b"1"
    background.wait(fn.entries[0])
