"""Sweep 24 (H2, D): fast.ai's MNIST basics and collaborative filtering and Spinning Up's reward-
to-go policy gradient, run with PyTorch, with llgrad eagerly and with llgrad compiling their
steps (tutorial_harness.py); the compiled steps trace a bounded number of times."""
import pytest

torch = pytest.importorskip("torch")

import tutorials_sweep24_d as d  # noqa: E402
from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch

PROGRAMS = {
    "fastai_mnist_basics": (d.fastai_mnist_basics, 2),
    "fastai_collab": (d.fastai_collab, 1),
    # (each epoch's batch has its own length; shapes stay specialised (README), so one
    # trace for each length: 25, 30, 32 and 30 again)
    "spinning_up_vpg": (d.spinning_up_vpg, 3),
}
TOL = {}

@pytest.mark.parametrize("name", list(PROGRAMS))
def test_program(name):
    program, max_traces = PROGRAMS[name]
    _, _, compiled = run_tutorial(program, **TOL.get(name, {}))
    for cf in compiled.steps:
        assert cf.n_traces <= max_traces, (cf.fn.__name__, cf.n_traces)
