"""Sweep 22 (H2, G): the FlexAttention docs' examples (score_mods, block masks, GQA, lse,
a compiled flex_attention in a self-attention layer), run with PyTorch (forward only: its CPU
FlexAttention has no backward), with llgrad eagerly and with llgrad compiling
(tutorial_harness.py)."""
import pytest

torch = pytest.importorskip("torch")

import programs_sweep22_h2_g as a  # noqa: E402
from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch

PROGRAMS = {
    "flex_attention_examples": a.flex_attention_examples,
}
SLOW = {"flex_attention_examples"}
TOL = {}


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.slow] if n in SLOW else [])
                                  for n in PROGRAMS])
def test_program(name):
    run_tutorial(PROGRAMS[name], **TOL.get(name, {}))
