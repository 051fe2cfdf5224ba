"""Optimiser hyper-parameters that the loop sets to NumPy float64s (DINO, iBOT and DeiT keep
their lr / weight-decay / momentum schedules as NumPy arrays and write `schedule[it]` into
param_groups each iteration): a compiled step takes them as graph inputs, as it does Python
floats, so one trace serves every value. They were guarded by value: a trace per
iteration, and eager calls with a recompile-limit warning from the ninth on."""
import warnings

import numpy as np
import pytest

import llgrad


def _train(lib, compiled, n_steps=12):
    lin = lib.nn.Linear(3, 2)
    with lib.no_grad():
        lin.weight.copy_(lib.tensor([[0.1, -0.2, 0.3], [0.5, 0.0, -0.4]]))
        lin.bias.copy_(lib.tensor([0.05, -0.05]))
    opt = lib.optim.AdamW(lin.parameters(), lr=0.1, betas=(0.9, 0.99))
    lrs = np.linspace(0.1, 0.01, n_steps)

    def step(x):
        loss = lin(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    if compiled:
        step = llgrad.compile(step)
    x = lib.tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3))
    losses = []
    for it in range(n_steps):
        group = opt.param_groups[0]
        group["lr"] = lrs[it]
        group["weight_decay"] = lrs[it] * 2
        group["betas"] = (np.float64(0.9), np.float64(0.99 - it * 1e-3))
        losses.append(float(step(x)))
    return step, losses, lin.weight.detach().numpy().copy(), opt.param_groups[0]


def test_numpy_float64_schedule_is_an_input():
    _, eager_losses, eager_w, _ = _train(llgrad, compiled=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")      # (no recompile-limit warning)
        step, losses, w, group = _train(llgrad, compiled=True)
    assert step.n_traces == 1
    assert type(group["lr"]) is np.float64      # (the loop's value, untouched)
    np.testing.assert_allclose(losses, eager_losses, rtol=1e-6)
    np.testing.assert_allclose(w, eager_w, rtol=1e-6)


@pytest.mark.torch
def test_numpy_float64_schedule_matches_torch():
    torch = pytest.importorskip("torch")
    _, ref_losses, ref_w, _ = _train(torch, compiled=False)
    _, losses, w, _ = _train(llgrad, compiled=True)
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-5)
    np.testing.assert_allclose(w, ref_w, rtol=1e-5, atol=1e-7)
