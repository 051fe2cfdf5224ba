"""The counters a compiled function exposes (n_traces, n_llvm_compiles): what a new shape
costs, against eager's results. A training loop with a ragged last batch and a sweep of
batch sizes: the first two sizes trace, later ones are made from their template
(compile/size_templates.py); a traced size builds its module (a training step, which runs
its own backward, is one graph), and the next builds code shared with every later size
(codegen/size_params.py), except that a size made from a template, built first, builds the
shared code at once (its template's graphs at a traced size are the partner); with
LLGRAD_SHARE_SIZES=0 every size builds its own;
sizes seen before, and a second function over the same graphs, build nothing. (Builds are made on the caller's thread here, LLGRAD_COMPILE=sync:
in the background mode a traced entry is built even if no call runs it again.)"""
import numpy as np
import pytest

import llgrad
import llgrad.nn as nn
import llgrad.nn.functional as F


@pytest.fixture(autouse=True)
def _sync(monkeypatch):
    monkeypatch.setenv("LLGRAD_COMPILE", "sync")


def _model(width):
    llgrad.manual_seed(0)
    return nn.Sequential(nn.Linear(width, 2 * width), nn.Tanh(), nn.Linear(2 * width, 3))


def _step_fn(model, opt):
    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


def _batches(n, batch, width, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, width)).astype(np.float32)
    y = rng.integers(0, 3, n)
    return [(llgrad.tensor(x[i:i + batch]), llgrad.tensor(y[i:i + batch]))
            for i in range(0, n, batch)]


def _train(step, batches, epochs):
    return [step(x, y).item() for _ in range(epochs) for x, y in batches]


def test_ragged_last_batch_costs_one_trace_and_one_build_per_size():
    width = 13                      # (a size no other test builds: the caches are cold)
    batches = _batches(70, 16, width)            # 16, 16, 16, 16, 6
    eager_model = _model(width)
    eager = _train(_step_fn(eager_model, llgrad.optim.SGD(eager_model.parameters(), 0.1)),
                   batches, 3)
    model = _model(width)
    step = llgrad.compile(_step_fn(model, llgrad.optim.SGD(model.parameters(), 0.1)))
    got = _train(step, batches, 3)
    np.testing.assert_allclose(got, eager, rtol=1e-5, atol=1e-6)
    # the first step reaches an optimiser with no state yet: it runs untraced (a trace of
    # it would not be kept); traces: the steps of 16 (.grad set), the step of 6; builds:
    # both entries, each when a call ran it again (the second, the code the family shares:
    # fewer where another test's graphs of the same family, other widths, made it already)
    assert step.n_traces == 2
    assert 1 <= step.n_llvm_compiles <= 2
    for (a, b), (c, d) in zip(model.state_dict().items(), eager_model.state_dict().items()):
        np.testing.assert_allclose(b.numpy(), d.numpy(), rtol=1e-5, atol=1e-6)

    # the same graphs again, from another function: found in the cache, nothing built
    again = llgrad.compile(_step_fn(model, llgrad.optim.SGD(model.parameters(), 0.1)))
    _train(again, batches, 1)
    assert again.n_traces == 2 and again.n_llvm_compiles == 0     # (.grad set from the start)


@pytest.mark.parametrize("share", ["1", "0"])
def test_sweep_of_batch_sizes_counts_and_results(monkeypatch, share):
    monkeypatch.setenv("LLGRAD_SHARE_SIZES", share)
    width = 11 if share == "0" else 12          # (no other test builds the specialised)
    sizes = [5, 9, 17, 33, 6, 10, 18, 34]
    eager_model, model = _model(width), _model(width)
    run_eager = _step_fn(eager_model, llgrad.optim.SGD(eager_model.parameters(), 0.05))
    step = llgrad.compile(_step_fn(model, llgrad.optim.SGD(model.parameters(), 0.05)),
                          recompile_limit=16)
    for b in sizes + sizes:
        x, y = _batches(b, b, width, seed=b)[0]
        np.testing.assert_allclose(step(x, y).item(), run_eager(x, y).item(),
                                   rtol=1e-5, atol=1e-6)
    # the first call runs untraced (a fresh optimiser); the second and third sizes are
    # traced, and every later size, the first one's second pass too, is made from their
    # template (compile/size_templates.py, no trace); entries are built when a call runs
    # them again: the first so built, a size made from the template, builds the code every
    # size shares (its template's graphs at a traced size the partner its shared form is
    # derived with: no build of its own size first; it may come from another test's graphs
    # of the same family), or each its own
    assert step.n_traces == 2
    assert sum(t.uses for t in step._sizes.templates) == len(sizes) - 2
    if share == "1":
        assert step.n_llvm_compiles <= 1
    else:
        assert step.n_llvm_compiles == len(sizes)     # (the first size's second pass too)


def test_counters_start_at_zero_and_reset():
    f = llgrad.compile(lambda x: (x * 3.0).sum())
    assert (f.n_traces, f.n_llvm_compiles) == (0, 0)
    f(llgrad.ones(7, 3))
    assert f.n_traces == 1 and f.n_llvm_compiles <= 1
    f.reset()
    assert (f.n_traces, f.n_llvm_compiles) == (0, 0)


def test_compiled_module_answers_the_counters():
    model = _model(7)
    cm = llgrad.compile(model)
    cm(llgrad.ones(4, 7))
    cm(llgrad.ones(4, 7))
    assert cm.n_traces == 1 and cm.n_llvm_compiles >= 1


@pytest.mark.parametrize("make_opt", [lambda ps: llgrad.optim.Adam(ps, 1e-2),
                                      lambda ps: llgrad.optim.SGD(ps, 0.1),
                                      lambda ps: llgrad.optim.SGD(ps, 0.1, momentum=0.9)])
def test_an_optimisers_first_step_runs_untraced(make_opt):
    """The first step makes the optimiser's state (Adam, SGD with momentum), so its trace
    would not be kept: it runs eagerly, untraced, and the second step traces. Plain SGD
    makes no state: its second step's entry serves every later step."""
    eager_model, model = _model(5), _model(5)
    run_eager = _step_fn(eager_model, make_opt(eager_model.parameters()))
    opt = make_opt(model.parameters())
    step = llgrad.compile(_step_fn(model, opt))
    x, y = _batches(8, 8, 5)[0]
    for k in range(4):
        np.testing.assert_allclose(step(x, y).item(), run_eager(x, y).item(), rtol=1e-5)
        assert step.n_traces == (0 if k == 0 else 1)
    for a, b in zip(model.parameters(), eager_model.parameters()):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-7)
    step.reset()                        # (a state made: the first call after it traces)
    np.testing.assert_allclose(step(x, y).item(), run_eager(x, y).item(), rtol=1e-5)
    assert step.n_traces == (1 if opt.state else 0)
