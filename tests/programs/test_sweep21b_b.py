"""Sweep 21b (B): official autograd tutorials (the YouTube series' autograd page, leaf and
non-leaf tensors, the "Extending PyTorch" note), run with PyTorch, with llgrad eagerly and
with llgrad compiling their steps (tutorial_harness.py)."""
import pytest

torch = pytest.importorskip("torch")

import programs_sweep21b_b as a  # noqa: E402
from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch

PROGRAMS = {
    "autograd_fundamentals": a.autograd_fundamentals,
    "leaf_nonleaf": a.leaf_nonleaf,
    "extending_pytorch": a.extending_pytorch,
}
SLOW = set()
TOL = {}


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.slow] if n in SLOW else [])
                                  for n in PROGRAMS])
def test_program(name):
    run_tutorial(PROGRAMS[name], **TOL.get(name, {}))

