"""bench/untuned_models_twentieth.py's six models (Slot Attention's randn slots, einsum attention
softmaxed over the slots and GRUCell updates; VICReg's variance and off-diagonal covariance
terms; a Neural Additive Model's ExU feature nets; a top-k sparse autoencoder's topk/scatter_
latents with its decoder renormalised after the step; deep-kernel GP regression through
cholesky and cholesky_solve; LISTA's unrolled soft thresholds), at small sizes, train a few
steps in torch, llgrad eager and llgrad compiled, seeded alike: losses and every parameter and
buffer against torch's, compiled against eager. Unmarked: a small step through the top-k
latents scattered into zeros and VICReg's off_diagonal view trick, eager and interpreted
against torch."""
import os
import sys

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
from untuned_steps import close, run_steps  # noqa: E402
import untuned_models_twentieth as models     # noqa: E402

STEPS = 3
# (VICReg: the biases ahead of BatchNorm get rounding-noise gradients that Adam makes whole
# steps, in torch as in llgrad; float64 agrees to 1e-8)
DTYPE = {"dkgp": "float64", "vicreg": "float64"}


def _noise(k):
    # (Slot Attention softmaxes over the slots: a shift shared by every slot's query, which
    # norm_slots' and to_q's biases are, cancels, so their gradients are rounding noise
    # (~1e-11) that Adam makes whole steps, in torch as in llgrad)
    return k in ("slot_attention.norm_slots.bias", "slot_attention.to_q.bias")


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
    close(e_state, t_state, rtol, "eager vs torch", _noise)
    np.testing.assert_allclose(c_loss, e_loss, rtol=rtol)
    close(c_state, e_state, rtol, "compiled vs eager", _noise)
    assert not c_notes, c_notes


def _sparse_step(lib, compiled):
    # (the top-k autoencoder's TopK scattered into zeros and VICReg's off_diagonal by
    # flatten()[:-1].view, with its variance hinge: a small step through both)
    lib.manual_seed(0)
    enc, dec = lib.nn.Linear(6, 10), lib.nn.Linear(10, 6, bias=False)
    params = [*enc.parameters(), *dec.parameters()]
    x = lib.tensor(np.linspace(-1, 1, 30, dtype=np.float32).reshape(5, 6) ** 3)

    def step():
        pre = enc(x)
        top = lib.topk(pre, k=3, dim=-1)
        lat = lib.zeros_like(pre)
        lat.scatter_(-1, top.indices, lib.relu(top.values))
        z = lat - lat.mean(dim=0)
        cov = (z.T @ z) / 4
        off = cov.flatten()[:-1].view(9, 11)[:, 1:].flatten()
        std = lib.sqrt(z.var(dim=0) + 1e-4)
        loss = ((dec(lat) - x) ** 2).mean() + off.pow(2).sum() / 10 + lib.relu(1 - std).mean()
        loss.backward()
        with lib.no_grad():     # (plain SGD by hand: torch.optim's first use imports ~5 s)
            for p in params:
                p -= 0.1 * p.grad
                p.grad = None
        return loss
    fn = llgrad.compile(step, backend="interpret") if compiled else step   # (no LLVM build)
    losses = [fn().item() for _ in range(3)]
    return losses, enc.weight.detach().numpy().copy(), (fn.n_traces if compiled else 1)


def test_topk_scatter_and_off_diagonal_step_as_torch():
    t_loss, t_w, _ = _sparse_step(torch, False)
    e_loss, e_w, _ = _sparse_step(llgrad, False)
    c_loss, c_w, traces = _sparse_step(llgrad, True)
    np.testing.assert_allclose(e_loss, t_loss, rtol=1e-5)
    np.testing.assert_allclose(e_w, t_w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(c_loss, e_loss, rtol=1e-5)
    np.testing.assert_allclose(c_w, e_w, rtol=1e-5, atol=1e-6)
    assert traces == 1
