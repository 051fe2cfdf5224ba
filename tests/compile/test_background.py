"""Native code built in the background (llgrad/compile/background.py): calls never wait for
LLVM, run eagerly (then with the interpreter's backward) until the code is ready, switch to
it, and give eager's results throughout; a failed build falls back to the interpreter with a
warning, given on the caller's thread as the build's other warnings are;
LLGRAD_COMPILE=sync builds before the call."""
import os
import threading
import time
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
        np.testing.assert_allclose(fn(x, w).numpy(), f(x, w).numpy(), rtol=1e-6, atol=1e-6)
    (entry,) = fn.entries
    assert "forward" not in entry.kernels         # still being built
    release.set()
    fn.wait()                           # (the public way: every entry's build)
    np.testing.assert_allclose(fn(x, w).numpy(), f(x, w).numpy(), rtol=1e-6, atol=1e-6)
    assert entry.kernels["forward"] is not None
    assert entry._forward_run is not entry._interim_runs.get("forward")


def test_calls_standing_in_for_the_build_build_no_eager_kernel(in_background, monkeypatch):
    """While the compiled code is built, calls run the function eagerly in its place; those
    ops are the compiled code's, so they queue no eager kernel's build (it would compete
    with the compiled code's; kernels already in a cache are used). A plain eager call of
    the same shapes does queue one."""
    from llgrad.compile import eager_builds
    from llgrad.runtime import trace_state
    release = threading.Event()
    real_lower, real_start = lower_module.lower, eager_builds.start
    queued = []

    def held_lower(graph, *args, **kw):     # (the compiled function's build only)
        if graph.name.startswith("stand_in_step"):
            assert release.wait(60), "the test never released the build"
        return real_lower(graph, *args, **kw)

    def recording_start(table, key, build):
        out = real_start(table, key, build)
        if table.get(key) is eager_builds.PENDING:
            queued.append((key[0] if isinstance(key, tuple) else key,
                           trace_state.state.standing_in))
        return out
    monkeypatch.setattr(lower_module, "lower", held_lower)
    monkeypatch.setattr(eager_builds, "start", recording_start)
    llgrad.manual_seed(0)
    conv = nn.Conv2d(3, 7, 3)       # (shapes no other test runs: no kernel of theirs yet)
    x = llgrad.randn(8, 3, 40, 40)
    opt = llgrad.optim.SGD(conv.parameters(), lr=0.0)     # (the same loss every step)

    def stand_in_step(x):
        opt.zero_grad()
        loss = conv(x).relu().softmax(-1).sum()
        loss.backward()
        opt.step()
        return loss
    fn = llgrad.compile(stand_in_step)
    f = stand_in_step
    with eager_builds.paused():
        want = f(x).item()
    try:
        for _ in range(5):      # a first step, the trace, then three calls standing in
            assert fn(x).item() == pytest.approx(want, rel=1e-6)
        assert "forward" not in fn.entries[0].kernels       # (still being built)
    finally:
        release.set()
        fn.wait()
        eager_builds.wait()
    assert [k for k, standing_in in queued if standing_in] == []
    f(x)                        # a plain eager call: its kernels' builds start
    eager_builds.wait()
    assert ("convolution", False) in queued


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


class _Gates:
    """lower() held per graph ("forward", "backward") of fn's first entry until opened:
    the three stages a call can meet (all eager, native forward with the interpreter's
    backward, native forward and backward) held as long as a test needs them."""

    def __init__(self, monkeypatch, fn):
        self.fn, self.open = fn, {"forward": threading.Event(), "backward": threading.Event()}
        real_lower = lower_module.lower

        def held_lower(graph, **kw):
            which = "forward" if graph is fn.entries[0].forward else "backward"
            assert self.open[which].wait(60), f"the test never opened the {which} gate"
            return real_lower(graph, **kw)
        monkeypatch.setattr(lower_module, "lower", held_lower)

    def release(self, which):
        self.open[which].set()
        if which == "forward":          # (the worker then holds in the backward's lower)
            entry = self.fn.entries[0]
            deadline = time.monotonic() + 60
            while entry._forward_run is None:
                assert time.monotonic() < deadline, "the forward was not built"
                time.sleep(0.01)

    def release_all(self):
        for e in self.open.values():
            e.set()


def _three_outputs(x, w, u):
    y = (x @ w).tanh()
    return y, (y * y).sum() + w.exp().mean(), x.shape[0]     # (u: unused, its .grad None)


def test_results_and_grads_are_eagers_before_during_and_after_the_switch(in_background,
                                                                         monkeypatch):
    """Several calls at each stage of a background build: while nothing is built (the calls
    run eagerly), with the native forward and the interpreter's backward, and with both
    native: outputs (values, dtypes, shapes, requires_grad, the Python number), the
    gradients of fresh inputs and the .grad a parameter accumulates over all the calls are
    eager's, call for call, to float64 rounding."""
    rng = np.random.default_rng(3)
    xs = [rng.standard_normal((5, 4)) for _ in range(9)]
    w0 = rng.standard_normal((4, 3))
    fn = llgrad.compile(_three_outputs)
    gates = _Gates(monkeypatch, fn)
    w_eager = llgrad.tensor(w0, requires_grad=True)
    w, u, u_eager = (llgrad.tensor(w0, requires_grad=True), llgrad.ones(2, requires_grad=True),
                     llgrad.ones(2, requires_grad=True))
    stages = []
    try:
        for k, a in enumerate(xs):
            if k == 3:
                gates.release("forward")
            elif k == 6:
                gates.release("backward")
                fn.wait()
            x, x_eager = (llgrad.tensor(a, requires_grad=True) for _ in range(2))
            got, want = fn(x, w, u), _three_outputs(x_eager, w_eager, u_eager)
            entry = fn.entries[0]
            stages.append((type(got[1].grad_fn).__name__, sorted(entry.kernels),
                           entry._backward_run is not None))
            assert got[2] == want[2] == 5 and type(got[2]) is int
            for g, e in zip(got[:2], want[:2]):
                assert (g.dtype, g.shape, g.requires_grad) == (e.dtype, e.shape, e.requires_grad)
                np.testing.assert_allclose(g.detach().numpy(), e.detach().numpy(),
                                           rtol=1e-12, atol=1e-14, err_msg=f"call {k}")
            got[1].backward()
            want[1].backward()
            for g, e in ((x, x_eager), (w, w_eager)):
                np.testing.assert_allclose(g.grad.numpy(), e.grad.numpy(), rtol=1e-12,
                                           atol=1e-14, err_msg=f"call {k}")
            assert u.grad is None and u_eager.grad is None
    finally:
        gates.release_all()
    assert fn.n_traces == 1
    assert stages[:3] == [("AddBackward0", [], False)] * 3, stages        # eager's graph
    assert stages[3:6] == [("CompiledFunctionBackward", ["forward"], False)] * 3, stages
    assert stages[6:] == [("CompiledFunctionBackward", ["backward", "forward"], True)] * 3, \
        stages


def test_a_backward_build_failing_after_the_native_forward_ran_warns(in_background,
                                                                      monkeypatch):
    """The forward is built and in use (its runner made) when the backward's build fails:
    the backward runs on the interpreter and its next call says so."""
    from llgrad.compile import backends
    backends._reset()

    def loss_of(x):
        return (x.exp() + 1).log().sum()
    fn = llgrad.compile(loss_of)
    gates = _Gates(monkeypatch, fn)
    held_lower = lower_module.lower     # (the forward: built once its gate opens)

    def failing_backward(graph, **kw):
        if graph is fn.entries[0].backward:
            assert gates.open["backward"].wait(60)
            raise RuntimeError("the backward's build broke")
        return held_lower(graph, **kw)
    monkeypatch.setattr(lower_module, "lower", failing_backward)
    x = llgrad.randn(7, requires_grad=True)
    try:
        fn(x).backward()                # the trace
        gates.release("forward")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fn(x).backward()            # native forward, the interpreter's backward
            gates.release("backward")
            fn.wait()
            for _ in range(2):
                x.grad = None
                got = fn(x)
                got.backward()
    finally:
        gates.release_all()
    failed = [str(w.message) for w in caught if "building native code failed" in str(w.message)]
    assert len(failed) == 1 and "the backward's build broke" in failed[0], \
        [str(w.message) for w in caught]
    want = llgrad.tensor(x.detach().numpy(), requires_grad=True)
    loss_of(want).backward()
    np.testing.assert_allclose(got.item(), loss_of(want).item(), rtol=1e-6)
    np.testing.assert_allclose(x.grad.numpy(), want.grad.numpy(), rtol=1e-6)
    kernels = fn.entries[0].kernels
    assert "backward" not in kernels and kernels["forward"] is not None


def test_warnings_of_a_build_come_at_the_next_call_on_the_callers_thread(in_background):
    """A graph native code does not cover (float16) warns as in sync mode, at the call
    that runs it, where the caller's filters apply, not on the build thread whenever it
    gets there; under an "error" filter it is no failed build either."""
    from llgrad.compile import backends
    backends._reset()

    def half_sin(x, w):
        return (x * w).sin().sum(0)

    def args():
        return (llgrad.tensor(np.linspace(-2, 2, 12).reshape(3, 4), dtype=llgrad.float16,
                              requires_grad=True),
                llgrad.tensor(np.arange(4.0), dtype=llgrad.float16))
    fn = llgrad.compile(half_sin)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fn(*args())                     # the trace (eager: no warning)
        fn.wait()                       # (the worker's warnings wait for the next call)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        x, w = args()
        out = fn(x, w)
        out.backward(llgrad.ones(4, dtype=llgrad.float16))
    texts = [str(m.message) for m in caught]
    for which in ("forward", "backward"):
        assert any(f"the {which} graph runs on the interpreter" in t and "float16" in t
                   for t in texts), texts
    assert not any("building native code failed" in t for t in texts), texts
    notes = fn.entries[0].kernels
    assert sorted(notes) == ["backward", "forward"] and \
        all(isinstance(n, str) and "float16" in n for n in notes.values()), notes
    xe, we = args()
    half_sin(xe, we).backward(llgrad.ones(4, dtype=llgrad.float16))
    np.testing.assert_array_equal(out.detach().numpy(), half_sin(xe, we).detach().numpy())
    np.testing.assert_array_equal(x.grad.numpy(), xe.grad.numpy())


def test_a_compiled_module_waits_for_its_build(in_background):
    """llgrad.compile(model).wait() is the compiled function's (not an attribute looked
    up on the module), as are its graph_breaks."""
    model = llgrad.compile(_model())
    x = llgrad.randn(4, 6)
    want = model._orig_mod(x)
    model(x)
    model.wait()
    out = model(x)
    assert type(out.grad_fn).__name__ == "CompiledFunctionBackward"
    assert model.entries[0].kernels["forward"] is not None and model.graph_breaks == []
    np.testing.assert_allclose(out.detach().numpy(), want.detach().numpy(), rtol=1e-6)
