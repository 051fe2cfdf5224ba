"""A batch size meeting a compiled function's changing number (a dynamic learning rate, a
temperature) in `/` or `**`: `lr / B` with B on the left, `B ** p`, `p ** B`. The size
stays a size the template remakes (runtime/symbolic_scalar.py: _float_operand, and a
SymInt's `/` deferring to the number's), so new batch sizes and new numbers cost no trace
each, and every call gives eager's numbers (bit for bit where no sum's order differs) and
torch's."""
import numpy as np
import pytest

import llgrad

EXPRESSIONS = {
    "size_over_number": lambda B, lr: B / lr,
    "number_over_size": lambda B, lr: lr / B,
    "size_to_number": lambda B, lr: B ** lr,
    "number_to_size": lambda B, lr: lr ** B,
    "size_to_scaled_number": lambda B, lr: B ** (lr * 0.5) - 1,
}
SIZES = [2, 3, 4, 5]         # (the fourth and later from the template)


@pytest.fixture(autouse=True)
def _dynamic_sizes(monkeypatch):
    monkeypatch.delenv("LLGRAD_DYNAMIC_SIZES", raising=False)


def _x(B):
    rng = np.random.default_rng(B)
    return rng.standard_normal((B, 3)).astype(np.float32)


@pytest.mark.parametrize("name", sorted(EXPRESSIONS))
def test_size_with_a_changing_number_traces_once_per_kind(name):
    expr = EXPRESSIONS[name]

    def f(x, lr):
        return x * expr(x.shape[0], lr)

    cf = llgrad.compile(f)
    for i, B in enumerate(SIZES):
        lr = 0.3 + 0.1 * i
        x = llgrad.tensor(_x(B))
        got = cf(x, lr)
        cf.wait()
        want = f(x, lr)
        np.testing.assert_array_equal(got.numpy(), want.numpy())
        np.testing.assert_array_equal(want.numpy(), _x(B) * np.float32(expr(B, lr)))
    # (a first trace; a second with lr an input; a third with B a SymInt: the template)
    assert cf.n_traces == 3, cf.n_traces


@pytest.mark.slow
def test_training_step_scaled_by_lr_over_batch_matches_eager_and_torch():
    torch = pytest.importorskip("torch")
    w0 = np.linspace(-1, 1, 3).astype(np.float32)

    def step(w, x, scale):
        loss = (x @ w).pow(2).sum() * (scale / x.shape[0]) + x.shape[0] ** (scale * 0.1)
        loss.backward()
        return loss.detach()

    cf = llgrad.compile(step)
    for i, B in enumerate(SIZES):
        scale = 1.0 + 0.25 * i
        outs = []
        for fn in (cf, step):
            w = llgrad.tensor(w0, requires_grad=True)
            loss = fn(w, llgrad.tensor(_x(B)), scale)
            if fn is cf:
                cf.wait()
            outs.append((loss.numpy(), w.grad.numpy()))
        # (the LLVM kernel's sum adds in another order than NumPy's: close, not equal)
        np.testing.assert_allclose(outs[0][0], outs[1][0], rtol=1e-6)
        np.testing.assert_allclose(outs[0][1], outs[1][1], rtol=1e-6)
        tw = torch.tensor(w0, requires_grad=True)
        tx = torch.tensor(_x(B))
        tl = (tx @ tw).pow(2).sum() * (scale / B) + B ** (scale * 0.1)
        tl.backward()
        np.testing.assert_allclose(outs[1][0], tl.detach().numpy(), rtol=1e-6)
        np.testing.assert_allclose(outs[1][1], tw.grad.numpy(), rtol=1e-6)
    assert cf.n_traces == 3, cf.n_traces
