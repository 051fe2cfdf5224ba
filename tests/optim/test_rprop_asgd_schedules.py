"""Rprop and ASGD under a learning-rate schedule, with the training step compiled: the lr
is an input of the compiled step (dynamic_hypers), so a schedule does not trace it again at
every change (both did, until the recompile limit sent every later step to eager); the
parameters follow eager's and torch's step by step."""
import numpy as np
import pytest

import llgrad

OPTIMISERS = {"Rprop": lambda lib, ps: lib.optim.Rprop(ps, lr=0.01),
              "ASGD": lambda lib, ps: lib.optim.ASGD(ps, lr=0.05, t0=3)}


def _run(lib, make_opt, compiled, epochs=10):
    lib.manual_seed(0)
    model = lib.nn.Linear(4, 3)
    with lib.no_grad():
        model.weight.copy_(lib.tensor(np.linspace(-1, 1, 12).reshape(3, 4), dtype=lib.float32))
        model.bias.fill_(0.1)
    opt = make_opt(lib, model.parameters())
    sched = lib.optim.lr_scheduler.ExponentialLR(opt, gamma=0.8)

    def step(x, y):
        opt.zero_grad()
        loss = lib.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()
    f = llgrad.compile(step) if compiled else step
    x = lib.tensor(np.linspace(-2, 2, 20).reshape(5, 4), dtype=lib.float32)
    y = lib.tensor([0, 1, 2, 0, 1])
    losses = []
    for _ in range(epochs):
        for _ in range(3):
            losses.append(f(x, y).item())
        sched.step()
    params = [p.detach().numpy().copy() for p in model.parameters()]
    return losses, params, getattr(f, "n_traces", None)


@pytest.mark.parametrize("name", sorted(OPTIMISERS))
def test_a_schedule_does_not_retrace_and_matches_eager(monkeypatch, name):
    monkeypatch.setenv("LLGRAD_COMPILE", "sync")
    losses, params, traces = _run(llgrad, OPTIMISERS[name], True)
    e_losses, e_params, _ = _run(llgrad, OPTIMISERS[name], False)
    assert traces == 1
    np.testing.assert_allclose(losses, e_losses, rtol=1e-5, atol=1e-6)
    for p, q in zip(params, e_params):
        np.testing.assert_allclose(p, q, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", sorted(OPTIMISERS))
def test_compiled_with_a_schedule_matches_torch(monkeypatch, name):
    torch = pytest.importorskip("torch")
    monkeypatch.setenv("LLGRAD_COMPILE", "sync")
    losses, params, _ = _run(llgrad, OPTIMISERS[name], True)
    t_losses, t_params, _ = _run(torch, OPTIMISERS[name], False)
    np.testing.assert_allclose(losses, t_losses, rtol=1e-5, atol=1e-6)
    for p, q in zip(params, t_params):
        np.testing.assert_allclose(p, q, rtol=1e-5, atol=1e-6)
