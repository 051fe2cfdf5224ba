"""What a call standing in for a background build costs (compile/background.py): once the
guard walker of its calls exists it takes the flat-key path (no full walk of the guards at
every call, as calls of native code do), and an eager kernel the disk cache lacks is probed
for once, not at each such call; results equal eager's before, during and after the
switch (here: to the interpreter, the held build failing once released, as LLVM would
take seconds on a loaded machine; tests/compile/test_background.py covers native code)."""
import threading

import numpy as np
import pytest

import llgrad
import llgrad.nn as nn
from llgrad.codegen import lower as lower_module
from llgrad.codegen.native import disk_only
from llgrad.compile import compiled_function, eager_builds, eager_native, eager_shaped_vjp
from llgrad.compile.run import until_built


@pytest.fixture
def held(monkeypatch, tmp_path):
    """Background builds (a fresh disk cache) whose lowering waits for release, then fails
    (the graphs then run on the interpreter, with a warning)."""
    monkeypatch.setenv("LLGRAD_COMPILE", "background")
    monkeypatch.setenv("LLGRAD_CACHE_DIR", str(tmp_path / "cache"))
    release = threading.Event()
    real_lower = lower_module.lower

    def held_lower(graph, *args, **kw):
        if graph.name.startswith("held_"):
            assert release.wait(60), "the test never released the build"
            raise RuntimeError("the held build fails")
        return real_lower(graph, *args, **kw)
    monkeypatch.setattr(lower_module, "lower", held_lower)
    return release


def _counting(monkeypatch, module, name):
    calls, real = [], getattr(module, name)

    def counted(*a, **k):
        calls.append(1)
        return real(*a, **k)
    monkeypatch.setattr(module, name, counted)
    return calls


def _data(n):
    rng = np.random.default_rng(3)
    return [(rng.standard_normal((16, 12)).astype(np.float32), rng.integers(0, 5, 16))
            for _ in range(n)]


def _model_and_step():
    llgrad.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 32), nn.Tanh(), nn.Linear(32, 5))
    opt = llgrad.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def held_step(x, y):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()
    return model, held_step


@pytest.mark.filterwarnings("ignore:.*held build")
def test_calls_standing_in_take_the_flat_key_path_and_switch(held, monkeypatch):
    batches = _data(7)
    want_model, eager_step = _model_and_step()      # the oracle: eager, never traced
    want_losses = [eager_step(llgrad.tensor(x), llgrad.tensor(y)).item() for x, y in batches]
    model, held_step = _model_and_step()
    fn = llgrad.compile(held_step)
    walks = _counting(monkeypatch, compiled_function, "collect")
    losses, walked = [], []
    try:
        for k, (x, y) in enumerate(batches):
            if k == 5:                  # the build ends: the entry's own runs from here on
                held.set()
                fn.wait()
            before = len(walks)
            losses.append(fn(llgrad.tensor(x), llgrad.tensor(y)).item())
            walked.append(len(walks) - before)
    finally:
        held.set()
        fn.wait()
    # calls: eager, the trace, the first stand-in (makes the walker), two stand-ins taking
    # the flat-key path, then the entry's own run (its runner put in the stand-ins' place)
    assert walked[3:] == [0, 0, 0, 0], walked
    assert fn.n_traces == 1 and fn.entries[0]._forward_run is not None
    assert [getattr(r, "func", None) for r in fn._fast.values()].count(until_built) == 0
    np.testing.assert_allclose(losses, want_losses, rtol=1e-5, atol=1e-6)
    for p, q in zip(model.parameters(), want_model.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.filterwarnings("ignore:.*held build")
def test_a_missing_eager_kernel_is_probed_once_while_standing_in(held, monkeypatch):
    eager_native.reset()                # (no kernel in memory: each is looked for on disk)
    probes = _counting(monkeypatch, disk_only, "probe")
    traces = _counting(monkeypatch, eager_native, "trace_body")     # (VJP rules traced for
    traces += _counting(monkeypatch, eager_shaped_vjp, "trace_body")    # their kernels)
    llgrad.manual_seed(0)
    lin = nn.Linear(97, 113)            # (GELU, layer_norm, their VJPs over 64 x 113: native
    x = llgrad.randn(64, 97)            # in eager)

    def held_gelu(x):
        h = nn.functional.layer_norm(lin(x), (113,))
        loss = nn.functional.gelu(h).square().mean()
        loss.backward()
        return loss.detach()
    fn = llgrad.compile(held_gelu)
    with llgrad.no_grad(), eager_builds.paused():
        want = nn.functional.gelu(nn.functional.layer_norm(lin(x), (113,))).square().mean()
    per_call = []
    try:
        for _ in range(6):      # a first call, the trace, then four calls standing in
            before = len(probes), len(traces)
            loss = fn(x)
            assert loss.item() == pytest.approx(want.item(), rel=1e-5)
            per_call.append((len(probes) - before[0], len(traces) - before[1]))
        assert "forward" not in fn.entries[0].kernels           # (still being built)
    finally:
        held.set()
        fn.wait()
    assert per_call[2][0] > 0 and per_call[2][1] > 0, per_call
    assert per_call[3:] == [(0, 0)] * 3, per_call
    g = lin.weight.grad.numpy().copy()
    lin.weight.grad = None
    with eager_builds.paused():         # (eager, building no kernel the test would wait on)
        held_gelu(x)                    # eager: the same gradient (6 calls accumulated)
    np.testing.assert_allclose(g, 6 * lin.weight.grad.numpy(), rtol=1e-4, atol=1e-6)
