"""bench/untuned_models_fifth.py's six models (DenseNet-BC, TCN, VQ-VAE, SimCLR, DDPM,
DeepFM) train a few steps in torch, llgrad eager and llgrad compiled (the whole step under
llgrad.compile), seeded alike: losses and every parameter and buffer against torch's,
compiled against eager (with the numbers a step reads out by .item()), and the compiled step runs as one graph (no eager fallback) whose
traces stop growing once warm."""
import os
import sys
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
import untuned_models_fifth as models    # noqa: E402

STEPS = 5      # (the first may run eagerly (a fresh optimiser), the second traces)
SLOW = ("densenet", "vqvae", "simclr", "ddpm", "deepfm", "tcn")


def _run(lib, name, compiled=False):
    model, step = models.build(lib, name)
    if compiled:
        step = llgrad.compile(step)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        losses = [step().item() for _ in range(STEPS - 1)]
        traces = step.n_traces if compiled else 0      # (the last call: a retrace each call shows)
        losses.append(step().item())
    fallbacks = [str(w.message) for w in caught if "llgrad" in str(w.message)
                 or "eager" in str(w.message)]
    state = {k: v.detach().numpy().astype(np.float64) for k, v in model.state_dict().items()}
    # (VQ-VAE's perplexities, read by .item() inside the step: the compiled step's too)
    losses += getattr(model, "train_res_perplexity", [])
    if compiled:
        fallbacks += step.graph_breaks + ([] if step.n_traces else ["never traced"])
        fallbacks += [] if step.n_traces == traces else [f"retraced: {traces} -> {step.n_traces}"]
    return losses, state, fallbacks


def _close(got, want, rtol, what):
    for k in want:
        scale = max(np.abs(want[k]).max(), 1e-3)
        err = np.abs(got[k] - want[k]).max() / scale
        assert err < rtol, f"{what}: {k} differs by {err:.1e} (relative to its largest entry)"


# DenseNet on 6 images trains with SGD at lr 0.1 through ReLUs fed by BatchNorm: in float32
# one pre-ReLU value of ~1e-7 takes either sign by rounding alone (torch's float32 and
# float64 disagree on it too) and flips a whole channel's BatchNorm-bias gradient by 20%,
# so it is checked in float64, where llgrad and torch agree to 1e-15
# DeepFM's tower biases feed BatchNorm: their gradients are mathematically zero, float32
# rounding noise that Adagrad scales to full lr-sized steps, so torch's and llgrad's differ
# by the noise, and so do the running means they shift (a float64 run can't help:
# BCEWithLogits returns its float32 target's dtype)
NOISE_ONLY = ("dnn.linears.0.bias", "dnn.linears.1.bias", "dnn.bn.0.running_mean", "dnn.bn.1.running_mean")


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n
                                  for n in models.NAMES])
def test_trains_as_torch_eager_and_compiled(name):
    dtype = "float64" if name == "densenet" else "float32"
    rtol = 1e-8 if dtype == "float64" else 2e-5
    old_t, old_l = torch.get_default_dtype(), llgrad.get_default_dtype()
    try:
        torch.set_default_dtype(getattr(torch, dtype))
        llgrad.set_default_dtype(getattr(llgrad, dtype))
        t_loss, t_state, _ = _run(torch, name)
        e_loss, e_state, e_notes = _run(llgrad, name)
        c_loss, c_state, c_notes = _run(llgrad, name, compiled=True)
    finally:
        torch.set_default_dtype(old_t)
        llgrad.set_default_dtype(old_l)
    assert not e_notes and not c_notes, e_notes + c_notes
    np.testing.assert_allclose(e_loss, t_loss, rtol=rtol)
    np.testing.assert_allclose(c_loss, e_loss, rtol=rtol)
    if name == "deepfm":    # (see NOISE_ONLY)
        t_state, e_state = ({k: v for k, v in d.items() if k not in NOISE_ONLY} for d in (t_state, e_state))
    _close(e_state, t_state, 50 * rtol, "eager vs torch")
    _close(c_state, e_state, 50 * rtol, "compiled vs eager")


@pytest.mark.parametrize("name", ["Adagrad", "Adamax"])
def test_eager_update_runs_torchs_ops(name):
    """An eager optimizer step with a number learning rate runs PyTorch's single-tensor ops
    (one addcdiv_, not mul, div_ and add_: DeepFM's 29 small parameters made Adagrad's step
    4x torch's, most of it per-op dispatch), and updates the parameter bit for bit as
    torch."""
    def run(lib):
        lib.manual_seed(0)
        p = lib.nn.Parameter(lib.randn(7, 3))
        opt = getattr(lib.optim, name)([p], lr=0.1)
        ops = []
        for _ in range(3):
            p.grad = lib.randn(7, 3)
            with lib.profiler.profile() as prof:
                opt.step()
            ops.append({e.key: e.count for e in prof.key_averages() if e.key.startswith("aten::")})
        return ops[-1], p.detach().numpy()
    (t_ops, t_p), (l_ops, l_p) = run(torch), run(llgrad)
    np.testing.assert_array_equal(l_p, t_p)
    assert l_ops.get("aten::addcdiv_") == t_ops["aten::addcdiv_"] == 1, (l_ops, t_ops)
    assert "aten::div_" not in l_ops and "aten::mul" not in l_ops, l_ops
