"""Sweep 21 (B): generative programs (a neural spline flow, StyleGAN2's modulated
convolution, a variational RNN, EDM's preconditioned denoiser and Heun sampler), run with
PyTorch, with llgrad eagerly and with llgrad compiling their steps (tutorial_harness.py)."""
import pytest

torch = pytest.importorskip("torch")

import programs_sweep21_b as b  # noqa: E402
from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch

PROGRAMS = {
    "neural_spline_flow": b.neural_spline_flow,
    "neural_spline_flow_sum_search": lambda torch, env: b.neural_spline_flow(
        torch, env, use_searchsorted=False),
    "stylegan_modulated_conv": b.stylegan_modulated_conv,
    "vrnn": b.vrnn,
    "edm_denoiser": b.edm_denoiser,
}
# (over ~1.5 s each with their LLVM builds, on a machine the suite shares: in the slow run)
SLOW = {"neural_spline_flow", "neural_spline_flow_sum_search", "stylegan_modulated_conv", "vrnn"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.slow] if n in SLOW else [])
                                  for n in PROGRAMS])
def test_program(name):
    run_tutorial(PROGRAMS[name])
