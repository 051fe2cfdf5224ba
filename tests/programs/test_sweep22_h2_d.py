"""Sweep 22 (H2, D): the official "Writing Custom Datasets, DataLoaders and Transforms",
the 2024 char-RNN name classifier and the "Reproducibility" note, run with PyTorch, with
llgrad eagerly and with llgrad compiling their steps (tutorial_harness.py)."""
import pytest

torch = pytest.importorskip("torch")

import programs_sweep22_h2_d as a  # noqa: E402
from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch

PROGRAMS = {
    "face_landmarks_dataset": a.face_landmarks_dataset,
    "char_rnn_classification": a.char_rnn_classification,
    "reproducibility": a.reproducibility,
}
SLOW = set()
TOL = {}


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.slow] if n in SLOW else [])
                                  for n in PROGRAMS])
def test_program(name):
    run_tutorial(PROGRAMS[name], **TOL.get(name, {}))
