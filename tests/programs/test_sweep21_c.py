"""Sweep 21 (C): sequence programs (a Hyena FFT long convolution, Performer's FAVOR+
attention with redrawn features, PatchTST with RevIN, SASRec), run with PyTorch, with
llgrad eagerly and with llgrad compiling their steps (tutorial_harness.py)."""
import pytest

torch = pytest.importorskip("torch")

import programs_sweep21_c as c  # noqa: E402
from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch

PROGRAMS = ["hyena_fft_conv", "performer_favor", "patchtst_revin", "sasrec"]
# (gaps in llgrad, each named)
XFAIL = {}      # (hyena_fft_conv's rfft / irfft compile since ir/complex_regions.py)
SLOW = {"hyena_fft_conv", "sasrec"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=(
    [pytest.mark.xfail(strict=True, reason=XFAIL[n])] if n in XFAIL else []) + (
    [pytest.mark.slow] if n in SLOW else [])) for n in PROGRAMS])
def test_program(name):
    run_tutorial(getattr(c, name))
