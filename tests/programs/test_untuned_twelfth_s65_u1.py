"""bench/untuned_models_twelfth.py's five models (a LLaMA-style LM with RoPE, SwiGLU and
scaled_dot_product_attention, a ConvLSTM next-frame predictor, a SIREN fitted to an image's
gradients by autograd.grad(create_graph=True), an end-to-end memory network, a character LM
on a peephole LSTM cell under a highway network), at small sizes, train a few steps in
torch, llgrad eager and llgrad compiled (the whole step under llgrad.compile), seeded alike:
losses and every parameter and buffer against torch's, compiled against eager, and the
compiled step runs as one graph (no warning, no graph break, no retrace once warm)."""
import os
import sys

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
from untuned_steps import close, run_steps  # noqa: E402
import untuned_models_twelfth as models     # noqa: E402

STEPS = 4      # (the first may run eagerly (a fresh optimiser), the second traces)


def _run(lib, name, compiled, small, dtype):
    old = lib.get_default_dtype()
    lib.set_default_dtype(getattr(lib, dtype))     # (the steps draw and make tensors too)
    try:
        return run_steps(models.build, lib, name, compiled, STEPS, small)
    finally:
        lib.set_default_dtype(old)


def _check(name, small=True, rtol=2e-5, dtype="float32"):
    t_loss, t_state, _ = _run(torch, name, False, small, dtype)
    e_loss, e_state, e_notes = _run(llgrad, name, False, small, dtype)
    c_loss, c_state, c_notes = _run(llgrad, name, True, small, dtype)
    assert not e_notes, e_notes
    assert not c_notes, c_notes
    np.testing.assert_allclose(e_loss, t_loss, rtol=rtol)
    np.testing.assert_allclose(c_loss, e_loss, rtol=rtol)
    close(e_state, t_state, 50 * rtol, "eager vs torch")
    close(c_state, e_state, 50 * rtol, "compiled vs eager")


# (small versions take 3-10 s each on a loaded machine, most of it building native code: the
# quickest runs by default; tests/compile/test_embedding_padding_s65_u1.py covers its fix)
FAST = {"memn2n"}


@pytest.mark.parametrize("name", [n if n in FAST else pytest.param(n, marks=pytest.mark.slow)
                                  for n in models.NAMES])
def test_small_trains_as_torch_eager_and_compiled(name):
    _check(name)


@pytest.mark.slow
@pytest.mark.parametrize("name", models.NAMES)
def test_whole_model_trains_as_torch_eager_and_compiled(name):
    # (float64: SIREN's sin(30 x) and RMSprop's division by a running root mean square
    # amplify float32 rounding over the steps, in torch as in llgrad; but the LLaMA's rotary
    # tables are float32 whatever the default dtype (the reference's .float()), and float32
    # cos/sin differ from torch's by an ulp, which AdamW's steps carry into the weights at
    # ~1e-6: it is checked in float32)
    if name == "llama":
        _check(name, small=False, rtol=2e-4)
    else:
        _check(name, small=False, rtol=1e-9, dtype="float64")
