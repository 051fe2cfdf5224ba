"""Sweep 21b (A): official tutorials (SuperResolutionNet, the Mario DDQN agent, the YouTube
series' GarmentClassifier), run with PyTorch, with llgrad eagerly and with llgrad compiling
their steps (tutorial_harness.py)."""
import pytest

torch = pytest.importorskip("torch")

import programs_sweep21b_a as a  # noqa: E402
from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch

PROGRAMS = {
    "super_resolution": a.super_resolution,
    "mario_ddqn": a.mario_ddqn,
    "garment_classifier": a.garment_classifier,
}
SLOW = {"super_resolution", "mario_ddqn", "garment_classifier"}
# (Adam's first steps divide near-zero conv gradients by their own size: float32 summation
# order moves a few weights by ~1% of lr)
TOL = {"mario_ddqn": dict(atol=1e-5)}


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.slow] if n in SLOW else [])
                                  for n in PROGRAMS])
def test_program(name):
    run_tutorial(PROGRAMS[name], **TOL.get(name, {}))
