"""bench/untuned_models_seventh.py's six models (DLRM, spatial transformer net, DQN, tiny NeRF,
BiLSTM-CRF, nn.Transformer translation) train a few steps in torch, llgrad eager and llgrad
compiled (the whole step under llgrad.compile), seeded alike: losses and every parameter and
buffer against torch's, compiled against eager, and the compiled step runs as one graph whose
traces stop growing once warm, but for the DQN, whose boolean mask of non-final states
selects another count each step: it runs eagerly with the warning that names the line."""
import os
import sys
import warnings

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
import untuned_models_seventh as models    # noqa: E402

STEPS = 5      # (the first may run eagerly (a fresh optimiser), the second traces)
DQN_STEPS = 9  # (four counts of its mask traced, then the warning and eager calls)
pytestmark = pytest.mark.slow     # (5-25 s a model on a loaded machine: builds, 4 DQN traces)


def _run(lib, name, compiled=False):
    model, step = models.build(lib, name)
    if compiled:
        step = llgrad.compile(step)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        losses = [step().item() for _ in range((DQN_STEPS if name == "dqn" else STEPS) - 1)]
        traces = step.n_traces if compiled else 0      # (the last call: a retrace each call shows)
        losses.append(step().item())
    notes = [str(w.message) for w in caught if "llgrad" in str(w.message)
             and "compiled" not in str(w.message)]     # (not the "compiled step in 1 s" notes)
    state = {k: v.detach().numpy().astype(np.float64) for k, v in model.state_dict().items()}
    if compiled and name != "dqn":
        notes += step.graph_breaks + ([] if step.n_traces else ["never traced"])
        notes += [] if step.n_traces == traces else [f"retraced: {traces} -> {step.n_traces}"]
    return losses, state, notes


def _close(got, want, rtol, what):
    for k in want:
        scale = max(np.abs(want[k]).max(), 1e-3)
        err = np.abs(got[k] - want[k]).max() / scale
        assert err < rtol, f"{what}: {k} differs by {err:.1e} (relative to its largest entry)"


def _without_key_biases(state):
    """The translation model's attention in_proj_bias without its key third: softmax is blind
    to the key's bias, whose gradient is rounding noise (~1e-10 against 1e-2) that Adam turns
    into lr-sized steps of the noise's sign, in torch as in llgrad."""
    out = dict(state)
    for k, v in state.items():
        if k.endswith("in_proj_bias"):
            d = v.shape[0] // 3
            out[k] = np.concatenate([v[:d], v[2 * d:]])
    return out


@pytest.mark.parametrize("name", models.NAMES)
def test_trains_as_torch_eager_and_compiled(name):
    t_loss, t_state, _ = _run(torch, name)
    e_loss, e_state, e_notes = _run(llgrad, name)
    c_loss, c_state, c_notes = _run(llgrad, name, compiled=True)
    assert not e_notes, e_notes
    if name == "dqn":
        assert len(c_notes) == 1 and "running eagerly" in c_notes[0] and \
            "changes from call to call" in c_notes[0], c_notes
    else:
        assert not c_notes, c_notes
    rtol = 2e-5
    np.testing.assert_allclose(e_loss, t_loss, rtol=rtol)
    np.testing.assert_allclose(c_loss, e_loss, rtol=rtol)
    if name == "translate":
        t_state, e_state, c_state = map(_without_key_biases, (t_state, e_state, c_state))
    if name == "stn":
        # theta's regressor starts at the identity, where grid_sample samples pixel centres
        # exactly: bilinear weights' gradient jumps there, and which side a grid point's
        # rounding takes differs between hosts' affine_grid (torch's own too): its weight,
        # zero at first, is checked to 1e-2 of its scale; the rest as the others are
        loc = [k for k in t_state if k.startswith("fc_loc.2.")]
        _close({k: e_state[k] for k in loc}, {k: t_state[k] for k in loc}, 1e-2,
               "eager vs torch")
        _close({k: c_state[k] for k in loc}, {k: e_state[k] for k in loc}, 1e-2,
               "compiled vs eager")
        t_state, e_state, c_state = ({k: v for k, v in d.items() if k not in loc}
                                     for d in (t_state, e_state, c_state))
    _close(e_state, t_state, 50 * rtol, "eager vs torch")
    _close(c_state, e_state, 50 * rtol, "compiled vs eager")
