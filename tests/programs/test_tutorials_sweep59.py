"""Sweep 59 (H1): first-month tutorial programs (tutorials_sweep59.py, _b.py) run with
PyTorch, with llgrad eagerly and with llgrad compiling their steps (tutorial_harness.py);
each compiled step traces about once per batch size it sees."""
import pytest

torch = pytest.importorskip("torch")

import tutorials_sweep59 as a  # noqa: E402
import tutorials_sweep59_b as b  # noqa: E402
from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch

PROGRAMS = {        # name: (program, most traces of any of its compiled steps)
    # (model.train() / model.eval() inside the steps: a trace more for the flags found on
    # entry, test_tutorials_sweep59_c.py)
    "mlp_early_stopping": (a.mlp_early_stopping, 3),
    "regression_mse_l1_plateau": (a.regression_mse_l1_plateau, 2),
    "multilabel_pos_weight": (a.multilabel_pos_weight, 2),
    # (pred[mask] over the tokens not ignored: its length, the mask's count, is a value
    # guard; the three batches have three counts)
    "tagger_class_weights": (a.tagger_class_weights, 3),
    "two_branch_clip_print": (a.two_branch_clip_print, 2),
    "text_mean_pool_topk": (b.text_mean_pool_topk, 2),
    "cnn1d_sequences": (b.cnn1d_sequences, 2),
    "conv_autoencoder_compiled_model": (b.conv_autoencoder_compiled_model, 3),
    # (batch sizes 8 and 5, the logging `if` on batch_idx, and epoch and batch_idx
    # guarded by value until they change)
    "mnist_example": (b.mnist_example, 5),
    "weighted_sampler_split": (b.weighted_sampler_split, 2),
}
SLOW = {"mlp_early_stopping", "mnist_example", "tagger_class_weights", "cnn1d_sequences",
        "two_branch_clip_print"}     # (the file in < 15 s on a loaded machine)


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.slow] if n in SLOW
                                               else []) for n in PROGRAMS])
def test_program(name):
    program, max_traces = PROGRAMS[name]
    _, _, compiled = run_tutorial(program)
    for cf in compiled.steps:
        assert cf.n_traces <= max_traces, (getattr(cf, "fn", cf), cf.n_traces)
