"""More tutorial programs (text and sequence models, reinforcement learning, torch.func,
training-loop recipes), run with PyTorch, with llgrad eagerly and with llgrad compiling their
steps, as test_tutorials.py runs the classic ones (see tutorial_harness.py)."""
import pytest

pytest.importorskip("torch")

import tutorials_func_more as func_more  # noqa: E402
import tutorials_rl as rl  # noqa: E402
import tutorials_text_more as text_more  # noqa: E402
import tutorials_training_more as training_more  # noqa: E402
from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch

PROGRAMS = {
    # language translation with nn.Transformer; text classification; an LSTM tagger
    "text.translation": text_more.translation,
    "text.classification": text_more.text_classification,
    "text.lstm_tagger": text_more.lstm_tagger,
    # REINFORCE and actor-critic (torch.distributions.Categorical)
    "rl.reinforce": rl.reinforce,
    "rl.reinforce_greedy": rl.reinforce_greedy,
    "rl.actor_critic": rl.actor_critic,
    "rl.actor_critic_greedy": rl.actor_critic_greedy,
    # torch.func: per-sample gradients, ensembling, jvp, jacobians and hessians
    "func.per_sample_grads": func_more.per_sample_grads,
    "func.ensembling": func_more.ensembling,
    "func.jvp": func_more.func_jvp,
    "func.jacobians": func_more.jacobians,
    # schedulers, gradient accumulation, checkpoints
    "training.lr_schedulers": training_more.lr_schedulers,
    "training.gradient_accumulation": training_more.gradient_accumulation,
    "training.checkpoint": training_more.checkpoint,
}


# (over ~1 s each, their builds of larger graphs: in the slow run, for the suite's time)
SLOW = {"training.lr_schedulers", "func.per_sample_grads", "text.translation",
        # (~0.7-1.3 s each: the LSTM tagger (compiled nn.LSTM steps: tests/nn/test_rnn.py,
        # the char_lstm example), gradient accumulation (test_soundness.py's "accumulate"
        # step orders))
        "text.lstm_tagger", "training.gradient_accumulation"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n
                                  for n in PROGRAMS])
def test_tutorial(name):
    run_tutorial(PROGRAMS[name])


def test_forward_ad_dual_numbers():
    """The dual-number half of the forward-mode AD tutorial (llgrad.autograd.forward_ad:
    make_dual / unpack_dual, dual parameters, a custom Function's jvp, gradcheck's
    check_forward_ad)."""
    run_tutorial(func_more.forward_ad)
