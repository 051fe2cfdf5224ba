"""What the untuned sets' tests (test_untuned_ninth/tenth/eleventh) share: a model's training
steps from its bench file's build(), the losses, the state after them and what llgrad said
(warnings, graph breaks, no trace, a retrace once warm); and the comparison of two states."""
import warnings

import numpy as np

import llgrad


def run_steps(build, lib, name, compiled=False, steps=4, small=True):
    """(losses, state as float64 arrays, notes) of `steps` steps of build(lib, name, small)."""
    model, step = build(lib, name, small=small)
    if compiled:
        step = llgrad.compile(step)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        losses = [step().item() for _ in range(steps - 1)]
        traces = step.n_traces if compiled else 0
        losses.append(step().item())
    notes = [str(w.message) for w in caught if "llgrad" in str(w.message)
             and "compiled" not in str(w.message)]     # (not the "compiled step in 1 s" notes)
    if compiled:
        notes += step.graph_breaks + ([] if step.n_traces else ["never traced"])
        notes += [] if step.n_traces == traces else [f"retraced: {traces} -> {step.n_traces}"]
    state = {k: v.detach().numpy().astype(np.float64) for k, v in model.state_dict().items()}
    return losses, state, notes


def close(got, want, rtol, what, noise=lambda k: False):
    """Every entry of state `got` within rtol of `want`'s, relative to its largest entry (the
    keys noise() names left out: rounding noise an optimiser amplifies)."""
    assert got.keys() == want.keys()
    for k in want:
        if noise(k):
            continue
        scale = max(np.abs(want[k]).max(), 1e-3)
        err = np.abs(got[k] - want[k]).max() / scale
        assert err < rtol, f"{what}: {k} differs by {err:.1e} (relative to its largest entry)"
