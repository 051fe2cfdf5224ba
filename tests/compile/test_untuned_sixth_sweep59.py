"""bench/untuned_models_sixth.py's six models (ResNet-18 with OneCycleLR, char-GRU, attention
U-Net with bilinear upsampling and Dice+BCE, Perceiver with kdim/vdim MultiheadAttention,
a Burgers PINN differentiating through autograd.grad(create_graph=True), a triplet Siamese
net) train a few steps in torch, llgrad eager and llgrad compiled (the whole step under
llgrad.compile), seeded alike, in float64: losses and every parameter and buffer against
torch's, compiled against eager, and the compiled step runs as one graph (no eager
fallback, no retrace once warm).

float64 because in float32 these steps cannot tell a bug from rounding: the U-Net's and
the Siamese net's biases before BatchNorm (and the Perceiver's key biases, which softmax
ignores) have gradients that are mathematically zero, rounding noise that Adam scales to
lr-sized steps, and one BatchNorm output of ~1e-8 takes either sign by rounding alone
(torch's float32 runs on 1 and 2 threads disagree on it), moving the U-Net's loss by 1e-4
after one step."""
import os
import sys
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
import untuned_models_sixth as models    # noqa: E402

STEPS = 4      # (the first runs eagerly (a fresh optimiser), the second traces)
SLOW = ("resnet18", "chargru", "attunet", "perceiver", "siamese", "pinn")  # (builds of 1-10 s)


def _run(lib, name, compiled=False):
    model, step = models.build(lib, name)
    if compiled:
        step = llgrad.compile(step)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        losses = [step().item() for _ in range(STEPS - 1)]
        traces = step.n_traces if compiled else 0
        losses.append(step().item())
    notes = [str(w.message) for w in caught if "llgrad" in str(w.message)
             or "eager" in str(w.message)]
    state = {k: v.detach().numpy().astype(np.float64) for k, v in model.state_dict().items()}
    if compiled:
        notes += step.graph_breaks + ([] if step.n_traces else ["never traced"])
        notes += [] if step.n_traces == traces else [f"retraced: {traces} -> {step.n_traces}"]
    return losses, state, notes


def _close(got, want, rtol, what):
    assert got.keys() == want.keys()
    for k in want:
        scale = max(np.abs(want[k]).max(), 1e-3)
        err = np.abs(got[k] - want[k]).max() / scale
        assert err < rtol, f"{what}: {k} differs by {err:.1e} (relative to its largest entry)"


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n
                                  for n in models.NAMES])
def test_trains_as_torch_eager_and_compiled(name):
    old_t, old_l = torch.get_default_dtype(), llgrad.get_default_dtype()
    try:
        torch.set_default_dtype(torch.float64)
        llgrad.set_default_dtype(llgrad.float64)
        t_loss, t_state, _ = _run(torch, name)
        e_loss, e_state, e_notes = _run(llgrad, name)
        c_loss, c_state, c_notes = _run(llgrad, name, compiled=True)
    finally:
        torch.set_default_dtype(old_t)
        llgrad.set_default_dtype(old_l)
    assert not e_notes and not c_notes, e_notes + c_notes
    np.testing.assert_allclose(e_loss, t_loss, rtol=1e-9)
    np.testing.assert_allclose(c_loss, e_loss, rtol=1e-9)
    _close(e_state, t_state, 1e-7, "eager against torch")
    _close(c_state, e_state, 1e-7, "compiled against eager")
