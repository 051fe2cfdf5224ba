"""Sweep 22 (H2, C): the official "Implementing High-Performance Transformers with Scaled
Dot Product Attention" tutorial (with the causal attention-bias subclasses) and the
"Accelerating PyTorch Transformers ..." tutorial's MultiHeadAttention on dense tensors, run
with PyTorch, with llgrad eagerly and with llgrad compiling their steps
(tutorial_harness.py)."""
import pytest

torch = pytest.importorskip("torch")

import programs_sweep22_h2_c as a  # noqa: E402
from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch

PROGRAMS = {
    "sdpa_tutorial": a.sdpa_tutorial,
    "transformer_building_blocks": a.transformer_building_blocks,
}
SLOW = set()
TOL = {}


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.slow] if n in SLOW else [])
                                  for n in PROGRAMS])
def test_program(name):
    run_tutorial(PROGRAMS[name], **TOL.get(name, {}))
