"""bench/untuned_models_ninth.py's six models (CapsNet with dynamic routing, DCN-V2, an
efficient-kan KAN, a mixture density network, a causal linear-attention LM, a Mamba LM), at
small sizes, train a few steps in torch, llgrad eager and llgrad compiled (the whole step
under llgrad.compile), seeded alike: losses and every parameter and buffer against torch's,
compiled against eager, and the compiled step runs as one graph (no warning, no graph break,
no retrace once warm)."""
import os
import sys
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
import untuned_models_ninth as models    # noqa: E402

STEPS = 4      # (the first may run eagerly (a fresh optimiser), the second traces)


def _run(lib, name, compiled=False):
    model, step = models.build(lib, name, small=True)
    if compiled:
        step = llgrad.compile(step)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        losses = [step().item() for _ in range(STEPS - 1)]
        traces = step.n_traces if compiled else 0
        losses.append(step().item())
    notes = [str(w.message) for w in caught if "llgrad" in str(w.message)
             and "compiled" not in str(w.message)]     # (not the "compiled step in 1 s" notes)
    if compiled:
        notes += step.graph_breaks + ([] if step.n_traces else ["never traced"])
        notes += [] if step.n_traces == traces else [f"retraced: {traces} -> {step.n_traces}"]
    state = {k: v.detach().numpy().astype(np.float64) for k, v in model.state_dict().items()}
    return losses, state, notes


def _close(got, want, rtol, what):
    assert got.keys() == want.keys()
    for k in want:
        scale = max(np.abs(want[k]).max(), 1e-3)
        err = np.abs(got[k] - want[k]).max() / scale
        assert err < rtol, f"{what}: {k} differs by {err:.1e} (relative to its largest entry)"


# (the compiled steps of these four build 550-1,500-op graphs: 3-7 s each, cold; slow)
SLOW = {"capsnet", "dcn", "linattn", "mamba"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n
                                  for n in models.NAMES])
def test_trains_as_torch_eager_and_compiled(name):
    t_loss, t_state, _ = _run(torch, name)
    e_loss, e_state, e_notes = _run(llgrad, name)
    c_loss, c_state, c_notes = _run(llgrad, name, compiled=True)
    assert not e_notes, e_notes
    assert not c_notes, c_notes
    rtol = 2e-5
    np.testing.assert_allclose(e_loss, t_loss, rtol=rtol)
    np.testing.assert_allclose(c_loss, e_loss, rtol=rtol)
    _close(e_state, t_state, 50 * rtol, "eager vs torch")
    _close(c_state, e_state, 50 * rtol, "compiled vs eager")
