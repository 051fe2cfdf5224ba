"""Sweep 24 (H2, A): d2l's decomposable-attention NLI program (BiRNN sentiment: part A3;
BERT: part A2), run with PyTorch, with llgrad eagerly and with llgrad compiling
their steps (tutorial_harness.py); the compiled steps trace a bounded number of times."""
import pytest

torch = pytest.importorskip("torch")

import tutorials_sweep24_a as a  # noqa: E402
from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch

PROGRAMS = {
    "decomposable_attention": (a.decomposable_attention, 3),   # (eval() -> train())
}
TOL = {}


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_program(name):
    program, max_traces = PROGRAMS[name]
    _, _, compiled = run_tutorial(program, **TOL.get(name, {}))
    for cf in compiled.steps:
        assert cf.n_traces <= max_traces, (cf.fn.__name__, cf.n_traces)
