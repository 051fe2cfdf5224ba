"""Sweep 21 (A): reinforcement-learning programs (C51, random network distillation, implicit
Q-learning, a decision transformer, a Dreamer-style RSSM), run with PyTorch, with llgrad
eagerly and with llgrad compiling their steps (tutorial_harness.py)."""
import pytest

torch = pytest.importorskip("torch")

import programs_sweep21_a as a  # noqa: E402
from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch

PROGRAMS = ["c51_dqn", "rnd_exploration", "iql", "decision_transformer", "rssm_world_model"]
# (over ~1.5 s each with their LLVM builds, on a machine the suite shares: in the slow run)
SLOW = {"c51_dqn", "decision_transformer", "rssm_world_model"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.slow] if n in SLOW else [])
                                  for n in PROGRAMS])
def test_program(name):
    run_tutorial(getattr(a, name))
