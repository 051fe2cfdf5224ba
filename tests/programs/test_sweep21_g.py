"""Sweep 21 (G): programs that change the model between compiled calls (a lottery ticket
rewound by load_state_dict, weight_norm removed half-way, a Gumbel-softmax VAE with an
annealed temperature, dead units re-initialised with their Adam state), run with PyTorch,
with llgrad eagerly and with llgrad compiling their steps (tutorial_harness.py)."""
import pytest

torch = pytest.importorskip("torch")

import programs_sweep21_g as g  # noqa: E402
from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch

PROGRAMS = ["lottery_ticket", "weight_norm_removed", "gumbel_categorical_vae", "dead_unit_reinit"]
XFAIL = {}
# (over ~1.5 s each with their LLVM builds: in the slow run)
SLOW = {"lottery_ticket"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=(
    [pytest.mark.xfail(strict=True, reason=XFAIL[n])] if n in XFAIL else []) + (
    [pytest.mark.slow] if n in SLOW else [])) for n in PROGRAMS])
def test_program(name):
    run_tutorial(getattr(g, name))
