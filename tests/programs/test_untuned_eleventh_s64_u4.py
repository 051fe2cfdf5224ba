"""bench/untuned_models_eleventh.py's five models (a ShuffleNetV2, a masked autoencoder with
argsort masking, a WGAN-GP step with its gradient penalty and requires_grad switching, MADE with
its masks resampled every step, a gMLP), at small sizes, train a few steps in torch, llgrad
eager and llgrad compiled (the whole step under llgrad.compile), seeded alike: losses and every
parameter and buffer against torch's, compiled against eager, and the compiled step runs as one
graph (no warning, no graph break, no retrace once warm)."""
import os
import sys

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
from untuned_steps import close, run_steps  # noqa: E402
import untuned_models_eleventh as models    # noqa: E402

STEPS = 4      # (the first may run eagerly (a fresh optimiser), the second traces)
# (MADE cycles two orderings: an entry for each, one more step before it is warm)
MORE_STEPS = {"made": 6}


def _run(lib, name, compiled=False, small=True, dtype="float32"):
    old = lib.get_default_dtype()
    lib.set_default_dtype(getattr(lib, dtype))     # (the steps draw and make tensors too)
    try:
        return run_steps(models.build, lib, name, compiled,
                         MORE_STEPS.get(name, STEPS), small)
    finally:
        lib.set_default_dtype(old)


def _check(name, small=True, rtol=2e-5, dtype="float32"):
    t_loss, t_state, _ = _run(torch, name, small=small, dtype=dtype)
    e_loss, e_state, e_notes = _run(llgrad, name, small=small, dtype=dtype)
    c_loss, c_state, c_notes = _run(llgrad, name, compiled=True, small=small, dtype=dtype)
    assert not e_notes, e_notes
    assert not c_notes, c_notes
    np.testing.assert_allclose(e_loss, t_loss, rtol=rtol)
    np.testing.assert_allclose(c_loss, e_loss, rtol=rtol)
    close(e_state, t_state, 50 * rtol, "eager vs torch")
    close(c_state, e_state, 50 * rtol, "compiled vs eager")


# (small versions: 5-20 s each on a loaded machine, most of it building native code: all slow;
# MADE's two fixes have fast tests of their own, tests/compile/test_array_writes_s64_u4.py and
# tests/tracer/test_whole_alias_write_s64_u4.py)
FAST = set()
# (the small ShuffleNet's BatchNorms normalise over 4-16 values and SGD at lr 0.1 amplifies
# their rounding, MAE's key biases have gradients that are rounding noise which AdamW steps by
# its sign: in float32 both differ from torch by rounding alone; in float64 they agree to 1e-11)
DOUBLE = {"shufflenet", "mae"}


@pytest.mark.parametrize("name", [n if n in FAST else pytest.param(n, marks=pytest.mark.slow)
                                  for n in models.NAMES])
def test_small_trains_as_torch_eager_and_compiled(name):
    if name in DOUBLE:
        _check(name, rtol=1e-9, dtype="float64")
    else:
        _check(name)


@pytest.mark.slow
@pytest.mark.parametrize("name", models.NAMES)
def test_whole_model_trains_as_torch_eager_and_compiled(name):
    # (full size: ShuffleNet's float32 losses differ from its float64 ones by 0.13 within 6
    # steps, in torch as in llgrad: rounding that SGD amplifies; gMLP's gating LayerNorms sit
    # before a spatial projection of weights ~1e-5, so their gradients are mostly rounding,
    # which Adam steps by its sign)
    if name in DOUBLE | {"gmlp"}:
        _check(name, small=False, rtol=1e-8, dtype="float64")
    else:
        _check(name, small=False, rtol=2e-4)
