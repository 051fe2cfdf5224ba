"""Sweep 21b (C): official tutorials (the YouTube series' tensors page, the save/load
recipes, Datasets & DataLoaders with Transforms), run with PyTorch, with llgrad eagerly
and with llgrad compiling their steps (tutorial_harness.py)."""
import pytest

torch = pytest.importorskip("torch")

import programs_sweep21b_c as a  # noqa: E402
from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch

PROGRAMS = {
    "tensors_intro": a.tensors_intro,
    "save_load_recipes": a.save_load_recipes,
    "datasets_transforms": a.datasets_transforms,
}
SLOW = set()
TOL = {}


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.slow] if n in SLOW else [])
                                  for n in PROGRAMS])
def test_program(name):
    run_tutorial(PROGRAMS[name], **TOL.get(name, {}))
