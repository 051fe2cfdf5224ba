"""bench/untuned_models_eighteenth.py's six models (N-BEATS's trend and seasonality bases, a
spiking network's surrogate-gradient autograd.Function in a loop over time, PoolFormer's
GroupNorm and count_include_pad=False pooling, a HyperNetwork's generated kernels, a stacked
hourglass's recursive MaxPool / nearest Upsample, the Gumbel-softmax VAE's rand-drawn noise), at
small sizes, train a few steps in torch, llgrad eager and llgrad compiled, seeded alike: losses
and every parameter and buffer against torch's, compiled against eager, one graph, no retrace
once warm."""
import os
import sys

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
from untuned_steps import close, run_steps  # noqa: E402
import untuned_models_eighteenth as models     # noqa: E402

STEPS = 3
# (float32 parts ways with torch within the steps where a gradient is rounding noise that Adam
# makes whole steps: PoolFormer's GroupNorm biases under 1e-5 layer scales, the hourglass's conv
# biases ahead of BatchNorm; in float64 both agree with torch's to 2e-9)
DTYPE = {"poolformer": "float64", "hourglass": "float64"}


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
    assert not c_notes, c_notes
