"""Sweep 59 (H1, c): what the sweep's programs found, each in small, against eager (and torch
where the program is torch's). A number in the state a step reads that the training loop
changes between calls (a scheduler's last lr printed inside the step, a loss weight
annealed on the module) is an input after it changes, as a number argument is, not a trace
per value (eager from the recompile limit on); one read by value stays guarded."""
import contextlib
import io
import warnings

import numpy as np
import pytest

import llgrad


def _steplr_print(lib, compiled, epochs=12):
    lib.manual_seed(0)
    model = lib.nn.Linear(4, 3)
    opt = lib.optim.SGD(model.parameters(), lr=0.1)
    sched = lib.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.8)
    x = lib.tensor(np.linspace(-1, 1, 20, dtype=np.float32).reshape(5, 4))
    y = lib.tensor([0, 1, 2, 1, 0])

    def train_batch(epoch, xb, yb):
        opt.zero_grad()
        loss = lib.nn.functional.cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()
        print(f"Epoch [{epoch + 1}/{epochs}], lr {sched.get_last_lr()[0]:.5f}, "
              f"Loss: {loss.item():.4f}")
        return loss.item()

    step = llgrad.compile(train_batch) if compiled else train_batch
    out, losses = io.StringIO(), []
    with contextlib.redirect_stdout(out):
        for epoch in range(epochs):
            losses.append(step(epoch, x, y))
            sched.step()
    return step, losses, out.getvalue(), [p.detach().numpy().copy()
                                          for p in model.parameters()]


def test_scheduler_last_lr_read_in_the_step():
    with warnings.catch_warnings():
        warnings.simplefilter("error")      # (no recompile limit reached, no fallback)
        step, losses, text, params = _steplr_print(llgrad, True)
    assert step.n_traces <= 3, step.n_traces
    _, e_losses, e_text, e_params = _steplr_print(llgrad, False)
    assert text == e_text
    np.testing.assert_allclose(losses, e_losses, rtol=1e-6)
    for a, b in zip(params, e_params):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    torch = pytest.importorskip("torch")
    _, t_losses, t_text, t_params = _steplr_print(torch, False)
    np.testing.assert_allclose(losses, t_losses, rtol=1e-5)
    for a, b in zip(params, t_params):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


class _Annealed(llgrad.nn.Module):
    """A VAE-style loss weight (and a temperature) the loop sets on the module."""

    def __init__(self):
        super().__init__()
        self.fc = llgrad.nn.Linear(3, 2)
        self.beta = 0.0
        self.temperature = 2.0
        self.threshold = 1       # (read by value: an int steering Python code)

    def forward(self, x):
        z = self.fc(x) / self.temperature
        loss = z.pow(2).mean() + self.beta * z.abs().mean()
        if self.threshold > 2:
            loss = loss * 2
        return loss


def _annealing(compiled, epochs=10):
    llgrad.manual_seed(0)
    m = _Annealed()
    opt = llgrad.optim.SGD(m.parameters(), lr=0.1)

    def step(x):
        opt.zero_grad()
        loss = m(x)
        loss.backward()
        opt.step()
        return loss.detach()

    f = llgrad.compile(step) if compiled else step
    x = llgrad.tensor([[1.0, -2.0, 0.5], [0.3, 0.2, -1.0]])
    out = []
    for epoch in range(epochs):
        m.beta = min(1.0, epoch / 5)
        m.temperature = 2.0 - 0.1 * epoch
        m.threshold = 1 if epoch < 6 else 3
        out.append(f(x).numpy().copy())
    return f, out, [p.detach().numpy().copy() for p in m.parameters()]


def test_module_numbers_annealed_between_calls():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        f, got, params = _annealing(True)
    _, want, e_params = _annealing(False)
    # (beta and temperature inputs after they change; threshold read by an `if`: guarded
    # by value again, two values)
    assert f.n_traces <= 4, f.n_traces
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    for a, b in zip(params, e_params):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def _train_eval_inside(compiled, epochs=4):
    llgrad.manual_seed(0)
    model = llgrad.nn.Sequential(llgrad.nn.Linear(3, 8), llgrad.nn.Dropout(0.0),
                                 llgrad.nn.ReLU(), llgrad.nn.Linear(8, 2))
    opt = llgrad.optim.SGD(model.parameters(), lr=0.1)

    def train_batch(x, y):
        model.train()
        opt.zero_grad()
        loss = llgrad.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    def eval_batch(x, y):
        model.eval()
        with llgrad.no_grad():
            return llgrad.nn.functional.cross_entropy(model(x), y).item()

    if compiled:
        train_batch, eval_batch = llgrad.compile(train_batch), llgrad.compile(eval_batch)
    x, y = llgrad.tensor([[1.0, -2.0, 0.5], [0.3, 0.2, -1.0]]), llgrad.tensor([0, 1])
    out = []
    for _ in range(epochs):
        out += [train_batch(x, y), train_batch(x, y), eval_batch(x, y), eval_batch(x, y)]
    return (train_batch, eval_batch), out


def test_train_eval_switch_inside_the_step_traces_once():
    (train_batch, eval_batch), got = _train_eval_inside(True)
    _, want = _train_eval_inside(False)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert (train_batch.n_traces, eval_batch.n_traces) == (1, 1)
