"""Fixes found by the sweep-10 tutorial programs, each checked against torch."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402

pytestmark = pytest.mark.torch


def _asgd_run(lib, compiled):
    lib.manual_seed(0)
    w = lib.nn.Parameter(lib.tensor([[0.5, -1.0], [2.0, 0.25]]))
    opt = lib.optim.ASGD([w], lr=0.1, t0=1, lambd=1e-3)

    def step(x):
        opt.zero_grad()
        loss = ((x @ w) ** 2).mean()
        loss.backward()
        opt.step()
        return loss.item()

    f = lib.compile(step) if compiled else step
    xs = [lib.tensor([[1.0, 2.0], [0.5, -1.0]]) * (1 + 0.1 * i) for i in range(6)]
    losses = [f(x) for x in xs]
    return f, losses, w.detach().numpy().copy(), opt.state[w]["ax"].numpy().copy()


def test_asgd_compiled_step_does_not_guard_mu():
    """ASGD's averaging branch (`mu.item() != 1`) made mu's value, which changes every
    step after t0, a value guard of a compiled step: one trace per step."""
    _, t_losses, t_w, t_ax = _asgd_run(torch, False)
    cf, losses, w, ax = _asgd_run(llgrad, True)
    np.testing.assert_allclose(losses, t_losses, rtol=1e-6)
    np.testing.assert_allclose(w, t_w, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(ax, t_ax, rtol=1e-6, atol=1e-7)
    assert cf.n_traces <= 2, cf.n_traces
