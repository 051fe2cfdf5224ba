"""Sweep 24 (H2, B2): d2l's TinySSD with multibox targets and NMS, run with PyTorch, with llgrad
eagerly and with llgrad compiling their steps (tutorial_harness.py); the compiled steps trace a
bounded number of times."""
import pytest

torch = pytest.importorskip("torch")

import tutorials_sweep24_b2 as b2  # noqa: E402
from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch

PROGRAMS = {
    # (float() of a tensor in the step: specialised once, then a symbolic value)
    "tiny_ssd": (b2.tiny_ssd, 2),
}
TOL = {}

SLOW = {'tiny_ssd'}   # whole programs over ~3 s: the slow set


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n
                                  for n in PROGRAMS])
def test_program(name):
    program, max_traces = PROGRAMS[name]
    _, _, compiled = run_tutorial(program, **TOL.get(name, {}))
    for cf in compiled.steps:
        assert cf.n_traces <= max_traces, (cf.fn.__name__, cf.n_traces)
