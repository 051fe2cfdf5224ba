"""Sweep 24 (H2, B): d2l's FCN (a bilinear-initialised transposed convolution) and style transfer
with the image as a parameter, run with PyTorch, with llgrad eagerly and with llgrad compiling
their steps (tutorial_harness.py); the compiled steps trace a bounded number of times."""
import pytest

torch = pytest.importorskip("torch")

import tutorials_sweep24_b as b  # noqa: E402
from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch

PROGRAMS = {
    "fcn_bilinear": (b.fcn_bilinear, 1),
    # (StepLR's counters: specialised, then symbolic, then one trace for each side of
    # `last_epoch % step_size != 0`, as torch.compile's automatic dynamic does; 13 epochs
    # still give 4)
    "style_transfer": (b.style_transfer, 4),
}
TOL = {}

SLOW = {'fcn_bilinear'}   # whole programs over ~3 s: the slow set


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n
                                  for n in PROGRAMS])
def test_program(name):
    program, max_traces = PROGRAMS[name]
    _, _, compiled = run_tutorial(program, **TOL.get(name, {}))
    for cf in compiled.steps:
        assert cf.n_traces <= max_traces, (cf.fn.__name__, cf.n_traces)
