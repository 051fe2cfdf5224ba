"""Sweep 24 (H2, C): d2l's Transformer encoder-decoder from scratch, AutoRec and DeepFM, run
with PyTorch, with llgrad eagerly and with llgrad compiling their steps
(tutorial_harness.py); the compiled steps trace a bounded number of times."""
import pytest

torch = pytest.importorskip("torch")

import tutorials_sweep24_c as c  # noqa: E402
from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch

PROGRAMS = {
    "transformer_seq2seq": (c.transformer_seq2seq, 1),
    "autorec": (c.autorec, 1),
    "deepfm": (c.deepfm, 1),
}
# (the first step's gradients agree to rtol 1e-5; Adam turns the rounding of near-zero
# gradient entries (a first query attending only to itself) into ~1e-5 of a weight)
TOL = {"transformer_seq2seq": dict(atol=2e-5)}


SLOW = {'transformer_seq2seq'}   # whole programs over ~3 s: the slow set


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n
                                  for n in PROGRAMS])
def test_program(name):
    program, max_traces = PROGRAMS[name]
    _, _, compiled = run_tutorial(program, **TOL.get(name, {}))
    for cf in compiled.steps:
        assert cf.n_traces <= max_traces, (cf.fn.__name__, cf.n_traces)
