"""bench/untuned_models_ninth.py's six models (CapsNet with dynamic routing, DCN-V2, an
efficient-kan KAN, a mixture density network, a causal linear-attention LM, a Mamba LM), at
small sizes, train a few steps in torch, llgrad eager and llgrad compiled (the whole step
under llgrad.compile), seeded alike: losses and every parameter and buffer against torch's,
compiled against eager, and the compiled step runs as one graph (no warning, no graph break,
no retrace once warm)."""
import os
import sys

import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
from untuned_steps import close, run_steps  # noqa: E402
import untuned_models_ninth as models    # noqa: E402

STEPS = 4      # (the first may run eagerly (a fresh optimiser), the second traces)


def _run(lib, name, compiled=False):
    return run_steps(models.build, lib, name, compiled, STEPS)


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
    close(e_state, t_state, 50 * rtol, "eager vs torch")
    close(c_state, e_state, 50 * rtol, "compiled vs eager")
