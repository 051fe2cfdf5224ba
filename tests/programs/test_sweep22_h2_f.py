"""Sweep 22 (H2, F): the official "Knowledge Distillation" tutorial's cosine-loss and
intermediate-regressor runs, run with PyTorch, with llgrad eagerly and with llgrad compiling
their steps (tutorial_harness.py)."""
import pytest

torch = pytest.importorskip("torch")

import programs_sweep22_h2_f as a  # noqa: E402
from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch

PROGRAMS = {
    "kd_hidden_representations": a.kd_hidden_representations,
}
SLOW = {"kd_hidden_representations"}
TOL = {}


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.slow] if n in SLOW else [])
                                  for n in PROGRAMS])
def test_program(name):
    run_tutorial(PROGRAMS[name], **TOL.get(name, {}))
