"""Sweep 22 (H2, A): the official "Fusing Convolution and Batch Norm using Custom Function",
"Compiled Autograd" and torch.func "whirlwind tour" tutorials, run with PyTorch, with llgrad
eagerly and with llgrad compiling their steps (tutorial_harness.py)."""
import pytest

torch = pytest.importorskip("torch")

import programs_sweep22_h2_a as a  # noqa: E402
from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch

PROGRAMS = {
    "fused_conv_bn": a.fused_conv_bn,
    "compiled_autograd": a.compiled_autograd,
    "whirlwind_tour": a.whirlwind_tour,
}
SLOW = {"fused_conv_bn"}
TOL = {}


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.slow] if n in SLOW else [])
                                  for n in PROGRAMS])
def test_program(name):
    run_tutorial(PROGRAMS[name], **TOL.get(name, {}))
