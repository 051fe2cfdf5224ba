"""bench/untuned_models_twentyfirst.py's six models (DETR's set loss with a greedy matcher
writing inf over the argmin's row and column; a latent Neural Process's Normal posteriors,
rsample and KL; a Hyena operator's implicit long filter applied by rfft/irfft; Bayes by
Backprop's sampled weights and scale-mixture prior; an energy-based model's Langevin steps
by backward w.r.t. the samples inside the step; ALiBi's per-head linear biases through
scaled_dot_product_attention), at small sizes, train a few steps in torch, llgrad eager and
llgrad compiled, seeded alike: losses and every parameter and buffer against torch's,
compiled against eager. Unmarked: a greedy matching's writes at a 0-d index tensor (the
argmin's row), traced once whatever row it picks, against torch."""
import os
import sys

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
from untuned_steps import close, run_steps  # noqa: E402
import untuned_models_twentyfirst as models     # noqa: E402

pytestmark = pytest.mark.torch

STEPS = 3
# (DETR: the decoder's biases ahead of LayerNorm and the softmax-shift-invariant key biases
# get rounding-noise gradients that AdamW makes whole steps, in torch as in llgrad; ALiBi's
# key bias likewise; float64 agrees to 1e-8)
DTYPE = {"detr": "float64", "alibi": "float64"}
# (the EBM's replay buffer keeps the Langevin samples, leaves made in the step that require
# grad, with their graph: compile runs that step eagerly, with its warning)
EAGER_STEP = {"ebm"}


def _run(lib, name, compiled, dtype):
    old = lib.get_default_dtype()
    lib.set_default_dtype(getattr(lib, dtype))
    try:
        return run_steps(models.build, lib, name, compiled, STEPS, True)
    finally:
        lib.set_default_dtype(old)


@pytest.mark.slow
@pytest.mark.parametrize("name", models.NAMES)
def test_small_trains_as_torch_eager_and_compiled(name):
    dtype = DTYPE.get(name, "float32")
    rtol = 1e-7 if dtype == "float64" else 1e-4
    t_loss, t_state, _ = _run(torch, name, False, dtype)
    e_loss, e_state, e_notes = _run(llgrad, name, False, dtype)
    c_loss, c_state, c_notes = _run(llgrad, name, True, dtype)
    assert not e_notes, e_notes
    np.testing.assert_allclose(e_loss, t_loss, rtol=rtol)
    close(e_state, t_state, rtol, "eager vs torch")
    np.testing.assert_allclose(c_loss, e_loss, rtol=rtol)
    close(c_state, e_state, rtol, "compiled vs eager")
    if name not in EAGER_STEP:
        assert not c_notes, c_notes


def _greedy_step(lib, compiled):
    # (DETR's matcher made greedy: each round the cheapest (row, col) of the cost, then inf
    # over that row and column through 0-d index tensors; the matched rows' predictions then
    # regress onto their columns' targets, and a row of a differentiable copy is zeroed at
    # the first pick)
    lib.manual_seed(0)
    pred = lib.nn.Linear(3, 2)
    with lib.no_grad():
        pred.weight.copy_(lib.tensor(np.linspace(-1, 1, 6).reshape(2, 3)))
        pred.bias.zero_()
    feats = lib.tensor(np.linspace(-1, 2, 15, dtype=np.float32).reshape(5, 3) ** 2)
    tgt = lib.tensor(np.array([[0.5, -0.2], [1.5, 0.3], [-0.4, 0.9]], np.float32))

    def step():
        out = pred(feats)
        with lib.no_grad():
            C = lib.cdist(out, tgt, p=1)
            rows, cols = [], []
            for _ in range(tgt.shape[0]):
                k = C.argmin()
                r, c = k // C.shape[1], k % C.shape[1]
                rows.append(r)
                cols.append(c)
                C[r, :] = float("inf")
                C[:, c] = float("inf")
        rows, cols = lib.stack(rows), lib.stack(cols)
        masked = out.clone()
        masked[rows[0]] = 0.0
        loss = (masked[rows] - tgt[cols]).abs().sum() + out.pow(2).mean()
        loss.backward()
        with lib.no_grad():     # (plain SGD by hand: torch.optim's first use imports ~5 s)
            for p in pred.parameters():
                p -= 0.3 * p.grad
                p.grad = None
        return loss, rows
    fn = llgrad.compile(step, backend="interpret") if compiled else step   # (no LLVM build)
    got = [fn() for _ in range(5)]
    losses = [l.item() for l, _ in got]
    picks = [r.tolist() for _, r in got]
    return losses, picks, pred.weight.detach().numpy().copy(), fn.n_traces if compiled else 1


def test_greedy_matching_writes_at_0d_index_tensors_trace_once():
    t_loss, t_rows, t_w, _ = _greedy_step(torch, False)
    e_loss, e_rows, e_w, _ = _greedy_step(llgrad, False)
    c_loss, c_rows, c_w, traces = _greedy_step(llgrad, True)
    assert len({tuple(r) for r in t_rows}) > 1     # (the picks change between steps)
    assert e_rows == t_rows and c_rows == t_rows
    np.testing.assert_allclose(e_loss, t_loss, rtol=1e-5)
    np.testing.assert_allclose(e_w, t_w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(c_loss, e_loss, rtol=1e-5)
    np.testing.assert_allclose(c_w, e_w, rtol=1e-5, atol=1e-6)
    assert traces == 1      # (not a trace per row the argmin picks)
