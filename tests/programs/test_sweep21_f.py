"""Sweep 21 (F): programs on rarely used options (MultiheadAttention's kdim / vdim /
add_bias_kv / add_zero_attn, a layer zoo, a loss zoo) and a liquid time-constant cell
clamped after each step, run with PyTorch, with llgrad eagerly and with llgrad compiling
their steps (tutorial_harness.py)."""
import pytest

torch = pytest.importorskip("torch")

import programs_sweep21_f as f  # noqa: E402
from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch

PROGRAMS = ["mha_rare_options", "layer_zoo", "loss_zoo", "liquid_time_constant"]
XFAIL = {}
# (over ~1.5 s each with their LLVM builds: in the slow run)
SLOW = {"mha_rare_options", "liquid_time_constant", "layer_zoo"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=(
    [pytest.mark.xfail(strict=True, reason=XFAIL[n])] if n in XFAIL else []) + (
    [pytest.mark.slow] if n in SLOW else [])) for n in PROGRAMS])
def test_program(name):
    run_tutorial(getattr(f, name))
