"""Sweep 21b (D): official recipes and notes (loading from a checkpoint onto the meta
device, reasoning about shapes, the default device, the profiler, autograd mechanics), run
with PyTorch, with llgrad eagerly and with llgrad compiling their steps
(tutorial_harness.py)."""
import pytest

torch = pytest.importorskip("torch")

import programs_sweep21b_d as a  # noqa: E402
from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch

PROGRAMS = {
    "checkpoint_tips": a.checkpoint_tips,
    "reasoning_about_shapes": a.reasoning_about_shapes,
    "default_device": a.default_device,
    "profiler_recipe": a.profiler_recipe,
    "autograd_mechanics": a.autograd_mechanics,
    "leaf_hooks_compiled": a.leaf_hooks_compiled,
}
SLOW = set()
TOL = {}


@pytest.mark.parametrize("name, program", program_params(PROGRAMS, SLOW))
def test_program(name, program):
    run_tutorial(program, **TOL.get(name, {}))
