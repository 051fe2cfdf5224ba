"""Sweep 58 (H2): tutorial and blog-post programs (tutorials_sweep58.py) run with PyTorch,
with llgrad eagerly and with llgrad compiling their steps (tutorial_harness.py); the
compiled steps trace a bounded number of times."""
import pytest

torch = pytest.importorskip("torch")

import tutorials_sweep58 as a  # noqa: E402
from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch

PROGRAMS = {
    "dann_gradient_reversal": (a.dann_gradient_reversal, 3),
    "bucketed_packed_gru": (a.bucketed_packed_gru, 6),   # (3 batch shapes, .grad None or not)
    "sam_optimizer": (a.sam_optimizer, 2),
    "transformer_copy_task": (a.transformer_copy_task, 1),
}
TOL = {}


SLOW = {'bucketed_packed_gru'}   # whole programs over ~3 s: the slow set


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n
                                  for n in PROGRAMS])
def test_program(name):
    program, max_traces = PROGRAMS[name]
    _, _, compiled = run_tutorial(program, **TOL.get(name, {}))
    for cf in compiled.steps:
        assert cf.n_traces <= max_traces, (cf.fn.__name__, cf.n_traces)
