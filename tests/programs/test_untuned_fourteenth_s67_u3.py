"""bench/untuned_models_fourteenth.py's five models (a Tacotron 2 whose encoder packs by
lengths.cpu().numpy() and whose location-sensitive attention decoder masks energies through
.data, a Performer LM with FAVOR+ kernels on QR-drawn features, a causal cumsum over 128
chunks and a redraw counter buffer compared in Python, an FNet classifier mixing tokens by
torch.fft.fft, a MobileNetV2 and an E(n)-equivariant graph network summing messages by
scatter_add_), at small sizes, train a few steps in torch, llgrad eager and llgrad compiled
(the whole step under llgrad.compile), seeded alike: losses and every parameter and buffer
against torch's, compiled against eager, and the compiled step runs as one graph (no warning,
no graph break, no retrace once warm)."""
import os
import sys

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
from untuned_steps import close, run_steps  # noqa: E402
import untuned_models_fourteenth as models     # noqa: E402

STEPS = 4      # (the first may run eagerly (a fresh optimiser), the second traces)
# (float64 where a bias feeds a normalisation (Tacotron's convolutions before BatchNorm) or a
# tiny model's gradient has entries near zero (FNet's): Adam turns their rounding noise into
# whole steps of lr, in torch on 1 and 2 threads alike)
DTYPE = {"tacotron": "float64", "fnet": "float64"}
FAST = {"performer", "egnn"}     # (the small versions of the others take 3-10 s each)


def _run(lib, name, compiled, small, dtype):
    old = lib.get_default_dtype()
    lib.set_default_dtype(getattr(lib, dtype))     # (the steps draw and make tensors too)
    try:
        return run_steps(models.build, lib, name, compiled, STEPS, small)
    finally:
        lib.set_default_dtype(old)


def _check(name, small=True, rtol=2e-5, dtype=None):
    dtype = dtype or DTYPE.get(name, "float32")
    rtol = 1e-9 if dtype == "float64" else rtol
    t_loss, t_state, _ = _run(torch, name, False, small, dtype)
    e_loss, e_state, e_notes = _run(llgrad, name, False, small, dtype)
    c_loss, c_state, c_notes = _run(llgrad, name, True, small, dtype)
    assert not e_notes, e_notes
    np.testing.assert_allclose(e_loss, t_loss, rtol=rtol)
    close(e_state, t_state, 50 * rtol, "eager vs torch")
    np.testing.assert_allclose(c_loss, e_loss, rtol=rtol)
    close(c_state, e_state, 50 * rtol, "compiled vs eager")
    assert not c_notes, c_notes


@pytest.mark.parametrize("name", [n if n in FAST else pytest.param(n, marks=pytest.mark.slow)
                                  for n in models.NAMES])
def test_small_trains_as_torch_eager_and_compiled(name):
    _check(name)


@pytest.mark.slow
@pytest.mark.parametrize("name", models.NAMES)
def test_whole_model_trains_as_torch_eager_and_compiled(name):
    # (the whole MobileNetV2's BatchNorm biases move by 5e-2 of their largest entry in float32
    # after 4 steps of SGD at lr 0.045, torch against llgrad; in float64 by 1e-12)
    _check(name, small=False, rtol=2e-4, dtype="float64" if name == "mobilenetv2" else None)
