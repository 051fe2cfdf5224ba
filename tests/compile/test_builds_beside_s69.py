"""An entry's forward and backward are built side by side (compile/background.py `beside`):
the backward's Python lowering runs while the forward's LLVM runs in the compile worker, in
LLGRAD_COMPILE=sync as in the background mode. Results, gradients, counters and failures are
what a build one after the other gives."""
import threading
import warnings

import numpy as np
import pytest

import llgrad
import llgrad.nn as nn
from llgrad.codegen import lower as lower_module
from llgrad.codegen.native import jit
from llgrad.compile import background
from llgrad.compile.log import build_seconds


def _loss_of(model):
    def loss(x):
        return (model(x) ** 2).mean()
    return loss


def _model():
    llgrad.manual_seed(0)
    return nn.Sequential(nn.Linear(5, 12), nn.Tanh(), nn.Linear(12, 3))


def _grads(model, loss, x):
    for p in model.parameters():
        p.grad = None
    out = loss(x)
    out.backward()
    return out.item(), [p.grad.numpy().copy() for p in model.parameters()]


@pytest.mark.parametrize("mode", ["sync", "background"])
def test_the_backward_builds_while_the_forward_does(mode, monkeypatch, tmp_path):
    monkeypatch.setenv("LLGRAD_COMPILE", mode)
    monkeypatch.setenv("LLGRAD_CACHE_DIR", str(tmp_path / "cache"))
    model = _model()
    loss = _loss_of(model)
    x = llgrad.randn(4 if mode == "sync" else 6, 5)     # (graphs not built before here)
    want = _grads(model, loss, x)
    order = []
    backward_began = threading.Event()
    held_lower, held_compile = lower_module.lower, jit.compile_module

    def noting_lower(graph, **kw):
        which = "forward" if graph is fn.entries[0].forward else "backward"
        order.append(f"{which} lowers")
        if which == "backward":
            backward_began.set()
        return held_lower(graph, **kw)

    def meeting_compile(mod, names, **kw):  # (the forward's LLVM waits for the backward's
        if "forward" in names[0]:           # lowering to begin: they overlap, or time out)
            order.append("forward to LLVM")
            assert backward_began.wait(60)
        return held_compile(mod, names, **kw)
    monkeypatch.setattr(lower_module, "lower", noting_lower)
    monkeypatch.setattr(jit, "compile_module", meeting_compile)
    fn = llgrad.compile(loss)
    for _ in range(3):
        got = _grads(model, fn, x)
        assert got[0] == pytest.approx(want[0], rel=1e-6)
        for g, w in zip(got[1], want[1]):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-7)
    fn.wait()
    (entry,) = fn.entries
    t = entry.timings
    assert t["backward_start"] < t["forward_end"] and t["forward_start"] < t["backward_end"]
    assert build_seconds(t) < t["forward"] + t["backward"]
    assert entry.llvm_builds == 2
    assert entry.kernels["forward"] is not None and entry.kernels["backward"] is not None
    # (the backward's Python starts once the forward's module is with LLVM, not sharing
    # the GIL with the forward's lowering, which the first native call waits for)
    assert order == ["forward lowers", "forward to LLVM", "backward lowers"]


def test_sync_a_failing_backward_build_fails_at_the_backward_as_before(monkeypatch):
    """The beside build's error is not lost nor raised on the forward's call: the backward's
    call builds it again and meets it there, as a build one after the other did."""
    monkeypatch.setenv("LLGRAD_COMPILE", "sync")
    held = lower_module.lower
    fn = None

    def failing(graph, **kw):
        if graph is fn.entries[0].backward:
            raise RuntimeError("the backward's build broke")
        return held(graph, **kw)
    monkeypatch.setattr(lower_module, "lower", failing)

    def loss_of(x):
        return (x.exp() + 1).log().sum()
    fn = llgrad.compile(loss_of)
    x = llgrad.randn(7, requires_grad=True)
    fn(x).backward()                    # the trace: eager's backward
    out = fn(x)                         # the native forward, its backward built beside
    background.wait(fn.entries[0])
    np.testing.assert_allclose(out.item(), loss_of(x).item(), rtol=1e-6)
    with pytest.raises(RuntimeError, match="the backward's build broke"):
        out.backward()


def test_sync_warnings_of_the_beside_build_come_on_the_callers_thread(monkeypatch):
    """A backward graph the lowering does not cover warns once, on the caller's thread at
    the next call (naming the user's line, where the caller's filters apply), not on the
    thread that built it beside the forward; the backward runs on the interpreter."""
    from llgrad.codegen.build import Unsupported
    from llgrad.compile import backends
    backends._reset()
    monkeypatch.setenv("LLGRAD_COMPILE", "sync")
    held = lower_module.lower
    fn = None

    def unsupported_backward(graph, **kw):
        if graph is fn.entries[0].backward:
            raise Unsupported(None, "a lowering made up for this test")
        return held(graph, **kw)
    monkeypatch.setattr(lower_module, "lower", unsupported_backward)

    def loss_of(x):
        return (x.sin() * 3).sum()
    fn = llgrad.compile(loss_of)
    x = llgrad.randn(6, requires_grad=True)
    fn(x).backward()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            x.grad = None
            fn(x).backward()
    made_up = [str(w.message) for w in caught if "made up" in str(w.message)]
    assert len(made_up) == 1 and "interpreter" in made_up[0] and \
        "test_builds_beside_s69.py:" in made_up[0], made_up
    assert fn.entries[0].kernels["backward"].startswith("interpreted")
    np.testing.assert_allclose(x.grad.numpy(), 3 * np.cos(x.detach().numpy()), rtol=1e-5)
