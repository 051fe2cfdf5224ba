"""Sweep 22 (H2, E): the official "Control Flow - Cond" tutorial, the dynamic-shapes docs'
compiled function over many batch sizes and the "Performance Tuning Guide", run with
PyTorch, with llgrad eagerly and with llgrad compiling their steps (tutorial_harness.py)."""
import pytest

torch = pytest.importorskip("torch")

import programs_sweep22_h2_e as a  # noqa: E402
from tutorial_harness import program_params, run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch

PROGRAMS = {
    "control_flow_cond": a.control_flow_cond,
    "performance_tuning": a.performance_tuning,
    # (ten batch sizes: two traces, the others made from their template, no recompile-limit
    # warning: compile/size_templates.py)
    "dynamic_shapes": a.dynamic_shapes,
}
SLOW = set()
TOL = {}


@pytest.mark.parametrize("name, program", program_params(PROGRAMS, SLOW))
def test_program(name, program):
    run_tutorial(program, **TOL.get(name, {}))
