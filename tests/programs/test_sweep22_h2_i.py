"""Sweep 22 (H2, I): the official "Audio Feature Extractions" tutorial's features (as
torchaudio computes them, on torch.stft) and the "Complex Numbers" docs page (eager), run
with PyTorch, with llgrad eagerly and with llgrad compiling their steps
(tutorial_harness.py)."""
import pytest

torch = pytest.importorskip("torch")

import programs_sweep22_h2_i as a  # noqa: E402
from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch

PROGRAMS = {
    "audio_features": a.audio_features,
    "complex_numbers": a.complex_numbers,
}
SLOW = {"audio_features"}
TOL = {}


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.slow] if n in SLOW else [])
                                  for n in PROGRAMS])
def test_program(name):
    run_tutorial(PROGRAMS[name], **TOL.get(name, {}))
