"""Sweep 24 (H2, A2): d2l's BERT pretraining (MLM + NSP) then fine-tuning for NLI with the
shared encoder, run with PyTorch, with llgrad eagerly and with llgrad compiling their steps
(tutorial_harness.py); the compiled steps trace a bounded number of times."""
import pytest

torch = pytest.importorskip("torch")

import tutorials_sweep24_a2 as a2  # noqa: E402
from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch

PROGRAMS = {
    "bert_pretraining": (a2.bert_pretraining, 1),
}
# (the first step's gradients agree to rtol 1e-5; Adam (lr 0.01) turns the rounding of a
# near-zero gradient entry into up to ~5e-6 of a weight over four steps)
TOL = {"bert_pretraining": dict(atol=2e-5)}

SLOW = {'bert_pretraining'}   # whole programs over ~3 s: the slow set


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n
                                  for n in PROGRAMS])
def test_program(name):
    program, max_traces = PROGRAMS[name]
    _, _, compiled = run_tutorial(program, **TOL.get(name, {}))
    for cf in compiled.steps:
        assert cf.n_traces <= max_traces, (cf.fn.__name__, cf.n_traces)
