"""Sweep 24 (H2, E): d2l's TextCNN, Zero to Mastery's TinyVGG train_step / test_step,
CS231n's saliency / fooling image / class visualisation, and d2l's ResNeXt fine-tuned with
a ten-times learning-rate head, run with PyTorch, with llgrad eagerly and with llgrad
compiling their steps (tutorial_harness.py); the compiled steps trace a bounded number of
times."""
import pytest

torch = pytest.importorskip("torch")

import tutorials_sweep24_e as e  # noqa: E402
from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch

PROGRAMS = {
    "d2l_textcnn": (e.d2l_textcnn, 1),
    "ztm_tinyvgg": (e.ztm_tinyvgg, 1),
    "ztm_tinyvgg_compiled_model": (e.ztm_tinyvgg_compiled_model, 2),   # (train and eval)
    "cs231n_visualization": (e.cs231n_visualization, 2),   # (.grad None, then a tensor)
    "resnext_finetune": (e.resnext_finetune, 1),
}
TOL = {}


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_program(name):
    program, max_traces = PROGRAMS[name]
    _, _, compiled = run_tutorial(program, **TOL.get(name, {}))
    for cf in compiled.steps:
        assert cf.n_traces <= max_traces, (cf.fn.__name__, cf.n_traces)
