"""Sweep 24 (H2, D2): Raschka's GPTModel from "Build a Large Language Model (From Scratch)"
(pretraining, generation, classification and instruction fine-tuning), run with PyTorch, with
llgrad eagerly and with llgrad compiling their steps (tutorial_harness.py); the compiled steps
trace a bounded number of times."""
import pytest

torch = pytest.importorskip("torch")

import tutorials_sweep24_d2 as d2  # noqa: E402
from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch

PROGRAMS = {
    # (dropout's p changed, then a new optimiser whose first step fills its state, which a
    # compiled call cannot replay: one traced run not kept; then the instruction batches'
    # shapes and a third optimiser)
    "llm_from_scratch_gpt": (d2.llm_from_scratch_gpt, 4),
}
TOL = {}

SLOW = {'llm_from_scratch_gpt'}   # whole programs over ~3 s: the slow set


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n
                                  for n in PROGRAMS])
def test_program(name):
    program, max_traces = PROGRAMS[name]
    _, _, compiled = run_tutorial(program, **TOL.get(name, {}))
    for cf in compiled.steps:
        assert cf.n_traces <= max_traces, (cf.fn.__name__, cf.n_traces)
