"""Sweep 58 (H2, b): tutorial and blog-post programs (tutorials_sweep58_b.py) run with
PyTorch, with llgrad eagerly and with llgrad compiling their steps (tutorial_harness.py);
the compiled steps trace a bounded number of times."""
import pytest

torch = pytest.importorskip("torch")

import tutorials_sweep58_b as b  # noqa: E402
from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch

PROGRAMS = {
    "lion_checkpoint_resume": (b.lion_checkpoint_resume, 3),
    "moco_queue": (b.moco_queue, 3),
    "multitask_moduledict": (b.multitask_moduledict, 6),   # (3 tasks x Adam state)
    "stream_ema_use_buffers": (b.stream_ema_use_buffers, 1),
}
TOL = {}


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_program(name):
    program, max_traces = PROGRAMS[name]
    _, _, compiled = run_tutorial(program, **TOL.get(name, {}))
    for cf in compiled.steps:
        assert cf.n_traces <= max_traces, (cf.fn.__name__, cf.n_traces)
