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
    "dynamic_shapes": pytest.param(a.dynamic_shapes, marks=pytest.mark.xfail(
        strict=True, reason="llgrad specialises shapes (dynamic=True and mark_dynamic are "
        "accepted and ignored): each batch size traces again, and the ninth runs eagerly "
        "with the recompile-limit warning")),
}
SLOW = set()
TOL = {}


@pytest.mark.parametrize("name, program", program_params(PROGRAMS, SLOW))
def test_program(name, program):
    run_tutorial(program, **TOL.get(name, {}))
