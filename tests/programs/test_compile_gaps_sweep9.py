"""Training-loop shapes that llgrad.compile ran eagerly where it can compile: a step that
backpropagates and updates only when the loss is finite (`if torch.isfinite(loss):
loss.backward(); opt.step()`) is compiled with the `if` left as Python (its condition a
value guard); a step whose `if` is left as Python still returns `loss.item()` as an output
(not a value guard that traced again for every new loss), as do float(loss.item()) and
round(loss.item(), 4); a Python number returned from a tensor-dependent branch stays a
Python number (it came back as a 0-d tensor). All give torch's numbers."""
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402

pytestmark = pytest.mark.torch


def _finite_guarded_training(lib, compile_step):
    nn, F = lib.nn, lib.nn.functional
    lib.manual_seed(0)
    model = nn.Linear(3, 1)
    opt = lib.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    batches = [(lib.randn(4, 3), lib.randn(4, 1)) for _ in range(3)]
    batches[1][0][2, 1] = float("inf")

    def train_step(x, y):
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        if lib.isfinite(loss):
            loss.backward()
            opt.step()
        return loss.detach()

    step = llgrad.compile(train_step) if compile_step else train_step
    losses = [step(*batches[i % 3]).item() for i in range(7)]
    return losses, [p.detach().numpy().copy() for p in model.parameters()], step


@pytest.mark.slow      # (~2.5 s with its LLVM builds)
def test_backward_and_step_under_a_tensor_condition_compile():
    ref_losses, ref_params, _ = _finite_guarded_training(torch, False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        losses, params, step = _finite_guarded_training(llgrad, True)
    step.wait()
    assert step.entries, step.graph_breaks      # (it was all eager before)
    ours = [str(w.message) for w in caught if "llgrad" in str(w.message)]
    assert len(ours) == 1 and "left as Python (value guards)" in ours[0], ours
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-6)
    assert np.isinf(losses[1]) and np.isinf(losses[4])
    for a, b in zip(params, ref_params):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def _clip_if_large(lib, compile_step, steps=10):
    nn, F = lib.nn, lib.nn.functional
    lib.manual_seed(0)
    model = nn.Linear(3, 2)
    opt = lib.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    data = [(lib.randn(6, 3), lib.randint(0, 2, (6,))) for _ in range(2)]

    def train_step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        norm = lib.sqrt(sum(p.grad.pow(2).sum() for p in model.parameters()))
        if norm > 0.5:              # (in-place on the grads: the if stays Python)
            for p in model.parameters():
                p.grad.mul_(0.5 / norm)
        opt.step()
        return loss.item()

    step = llgrad.compile(train_step) if compile_step else train_step
    losses = [step(*data[i % 2]) for i in range(steps)]
    return losses, [p.detach().numpy().copy() for p in model.parameters()], step


def test_returned_item_stays_an_output_when_the_if_is_left_as_python():
    """`return loss.item()` is a graph output, not a value guard, also once the function's
    control flow is left as Python: the step does not trace again for every new loss (it
    did, up to the recompile limit, then ran eagerly)."""
    ref_losses, ref_params, _ = _clip_if_large(torch, False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        losses, params, step = _clip_if_large(llgrad, True)
    assert not [w for w in caught if "recompile limit" in str(w.message)]
    assert step.n_traces <= 3, step.n_traces     # (the two outcomes of the if)
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-5)
    for a, b in zip(params, ref_params):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("form", ["float", "round"])
def test_cast_of_a_returned_item_stays_an_output(form):
    """`return float(loss.item())` and `return round(loss.item(), 4)` (as training loops
    write their logging) are graph outputs: one trace, not one per loss value (then the
    recompile limit and eager)."""
    results = []
    for lib in (torch, llgrad):
        lib.manual_seed(0)
        model = lib.nn.Linear(3, 1)
        opt = lib.optim.SGD(model.parameters(), lr=0.1)
        x, y = lib.randn(8, 3), lib.randn(8, 1)

        def float_step(x, y):
            opt.zero_grad()
            loss = lib.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            return float(loss.item()), -abs(loss.item())

        def round_step(x, y):
            opt.zero_grad()
            loss = lib.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            return round(loss.item(), 4), round(loss.item() * 100)

        step = float_step if form == "float" else round_step
        step = llgrad.compile(step) if lib is llgrad else step
        results.append([step(x, y) for _ in range(6)])
    assert step.n_traces == 1, step.n_traces
    for (a, b), (c, d) in zip(results[1], results[0]):
        assert type(a) is type(c) and type(b) is type(d)
        assert a == pytest.approx(c, rel=1e-6) and b == pytest.approx(d, rel=1e-6)


def _returns_from_branches(lib):
    w = lib.tensor([0.5, -1.0, 2.0])

    def f(x):
        s = (x * w).sum()
        if s > 1:
            return s.item()
        if s > 0:
            return s
        return 0.0
    return f


def test_a_python_number_returned_from_a_tensor_dependent_branch_stays_a_number():
    """`if s > 0: return s` / `return 0.0` (and `return s.item()` in a branch): eager returns
    the Python number; the compiled function returned a 0-d tensor (the branches merged into
    one graph output). Now the if is left as Python there: torch's types and values."""
    cf = llgrad.compile(_returns_from_branches(llgrad))
    f = _returns_from_branches(torch)
    inputs = [[1.0, 0.0, 1.0], [2.0, 1.0, 0.0], [1.0, 1.0, 0.0], [0.0, 0.0, 0.4]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")         # (compile's value-guard note)
        got = [cf(llgrad.tensor(v)) for v in inputs + inputs]
    want = [f(torch.tensor(v)) for v in inputs + inputs]
    for g, w in zip(got, want):
        assert type(g).__name__ == type(w).__name__, (g, w)
        assert float(g) == pytest.approx(float(w), rel=1e-6)
