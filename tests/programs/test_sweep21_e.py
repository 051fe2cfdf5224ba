"""Sweep 21 (E): tabular, causal, federated and optimiser programs (TabNet, Dragonnet,
federated averaging over deep-copied clients, a schedule-free SGD Optimizer subclass,
RotatE), run with PyTorch, with llgrad eagerly and with llgrad compiling their steps
(tutorial_harness.py)."""
import pytest

torch = pytest.importorskip("torch")

import programs_sweep21_e as e  # noqa: E402
from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch

PROGRAMS = ["tabnet", "dragonnet", "fedavg", "schedule_free_sgd", "rotate_kge"]
XFAIL = {}
# (over ~1.5 s each with their LLVM builds: in the slow run)
SLOW = {"tabnet"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=(
    [pytest.mark.xfail(strict=True, reason=XFAIL[n])] if n in XFAIL else []) + (
    [pytest.mark.slow] if n in SLOW else [])) for n in PROGRAMS])
def test_program(name):
    run_tutorial(getattr(e, name))


def test_fedavg_many_clients():
    """Twelve clients' fresh optimisers (past the recompile limit of 8): each first step
    used to trace again (a traced run the optimiser's new state keeps from being kept),
    until the ninth ran eagerly with a warning."""
    run_tutorial(lambda torch, env: e.fedavg(torch, env, n_clients=6))
