"""The classic PyTorch tutorials, written once against a module parameter `torch` and run
with PyTorch, with llgrad eagerly and with llgrad compiling their training steps: losses,
outputs, gradients and parameters after a few steps agree (float32 tolerances), the
compiled run agrees with eager, and llgrad warns of nothing (no compile fallback). See
tutorial_harness.py for how the runs share initial weights and random data."""
import pytest

pytest.importorskip("torch")

import tutorials_examples as examples  # noqa: E402
import tutorials_models as models  # noqa: E402
import tutorials_nlp as nlp  # noqa: E402
import tutorials_nn_really as nn_really  # noqa: E402
import tutorials_quickstart as quickstart  # noqa: E402
import tutorials_seq as seq  # noqa: E402
from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch

PROGRAMS = {
    # 1. Learning PyTorch with Examples
    "examples.raw_tensors": examples.raw_tensors,
    "examples.autograd": examples.autograd,
    "examples.custom_function": examples.custom_function,
    "examples.nn_manual_update": examples.nn_manual_update,
    "examples.nn_optim": examples.nn_optim,
    "examples.custom_module": examples.custom_module,
    "examples.dynamic_net": examples.dynamic_net,
    # 2. What is torch.nn really?
    "nn_really.by_hand": nn_really.by_hand,
    "nn_really.module_and_linear": nn_really.module_and_linear,
    "nn_really.dataset_and_loader": nn_really.dataset_and_loader,
    "nn_really.cnn": nn_really.cnn,
    "nn_really.sequential_lambda": nn_really.sequential_lambda,
    # 3. Quickstart; 4. autograd mechanics
    "quickstart": quickstart.quickstart,
    "autograd.basics": quickstart.autograd_basics,
    "autograd.higher_order": quickstart.autograd_higher_order,
    "autograd.module_hooks": quickstart.module_hooks,
    # 5. NLP from scratch; 10. word embeddings
    "nlp.char_rnn_classify": nlp.char_rnn_classify,
    "nlp.names_generation": nlp.names_generation,
    "nlp.names_generation_dropout": nlp.names_generation_dropout,
    "nlp.seq2seq_attention": seq.seq2seq_attention,
    "nlp.ngram": nlp.ngram,
    # 6. Transformer language model
    "transformer_lm": seq.transformer_lm,
    "transformer_lm_dropout": seq.transformer_lm_dropout,
    # 7. DCGAN; 8. VAE; 9. DQN
    "dcgan": models.dcgan,
    "vae": models.vae,
    "vae_random": models.vae_random,
    "dqn": models.dqn,
}
SLOW = {"dcgan", "transformer_lm_dropout",     # (~5-10 s: their builds of large graphs)
        "nn_really.sequential_lambda", "vae", "nlp.seq2seq_attention",    # (~1 s)
        # (~1-1.5 s; a dropout variant whose plain program runs by default, and the DQN,
        # whose kind of step the tutorials_rl programs of test_tutorials_text_more.py run)
        "nlp.names_generation_dropout", "dqn"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n
                                  for n in PROGRAMS])
def test_tutorial(name):
    run_tutorial(PROGRAMS[name])
