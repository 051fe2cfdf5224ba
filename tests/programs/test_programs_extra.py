"""Still more programs of common kinds (a packed GRU seq2seq with teacher forcing, a
weight-tied char LSTM with truncated BPTT, a padded TransformerEncoder classifier, a
depthwise-separable Conv1d net, ESPCN super-resolution, a VQ-VAE, siamese/triplet
embeddings, init schemes with hooks, a multi-task ModuleDict model, Dataset/collate_fn/
random_split, EMA/SWA averaging, an imbalanced classifier with focal loss and mixup), run
with PyTorch, with llgrad eagerly and with llgrad compiling their steps; see
tutorial_harness.py."""
import pytest

pytest.importorskip("torch")

import programs_extra_seq as seq  # noqa: E402
import programs_extra_training as training  # noqa: E402
import programs_extra_vision as vision  # noqa: E402
from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch

PROGRAMS = {
    # sequences
    "seq.seq2seq_gru_packed": seq.seq2seq_gru_packed,
    "seq.char_lstm_tbptt": seq.char_lstm_tbptt,
    "seq.transformer_classifier": seq.transformer_classifier,
    "seq.conv1d_classifier": seq.conv1d_classifier,
    # vision and representation learning
    "vision.super_resolution": vision.super_resolution,
    "vision.vq_vae": vision.vq_vae,
    "vision.siamese_triplet": vision.siamese_triplet,
    "vision.init_and_hooks": vision.init_and_hooks,
    # training recipes
    "training.multitask_moduledict": training.multitask_moduledict,
    "training.dataset_collate_split": training.dataset_collate_split,
    "training.ema_swa": training.ema_swa,
    "training.imbalanced_mixup": training.imbalanced_mixup,
}


# (over ~1 s each, their builds of larger graphs: in the slow run, for the suite's time)
SLOW = {"seq.seq2seq_gru_packed", "seq.char_lstm_tbptt", "seq.transformer_classifier",
        "training.multitask_moduledict"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n
                                  for n in PROGRAMS])
def test_program(name):
    run_tutorial(PROGRAMS[name])
