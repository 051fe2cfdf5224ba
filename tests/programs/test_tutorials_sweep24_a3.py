"""Sweep 24 (H2, A3): d2l's BiRNN sentiment program, run with PyTorch, with llgrad eagerly
and with llgrad compiling its step (tutorial_harness.py); the compiled step traces once."""
import pytest

torch = pytest.importorskip("torch")

import tutorials_sweep24_a as a  # noqa: E402
from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch

PROGRAMS = {
    "birnn_sentiment": (a.birnn_sentiment, 1),
}
TOL = {}


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_program(name):
    program, max_traces = PROGRAMS[name]
    _, _, compiled = run_tutorial(program, **TOL.get(name, {}))
    for cf in compiled.steps:
        assert cf.n_traces <= max_traces, (cf.fn.__name__, cf.n_traces)
