"""More vision/training tutorials (CIFAR classifier, transfer learning, FGSM, conv+bn
fusion, neural style, knowledge distillation, training utilities), run with PyTorch, with
llgrad eagerly and with llgrad compiling their steps; see tutorial_harness.py."""
import pytest

pytest.importorskip("torch")

import tutorials_vision_more as vision  # noqa: E402
import tutorials_vision_train as train  # noqa: E402
from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch

PROGRAMS = {
    "cifar_classifier": vision.cifar_classifier,
    "transfer_fixed_feature": vision.transfer_fixed_feature,
    "transfer_finetune": vision.transfer_finetune,
    "fgsm": vision.fgsm,
    "fuse_conv_bn": vision.fuse_conv_bn,
    "neural_style": train.neural_style,
    "distillation": train.distillation,
    "distillation_kl": lambda torch, env: train.distillation(torch, env, kl=True),
    "distillation_dropout": lambda torch, env: train.distillation(torch, env, dropout=0.3),
    "training_utilities": train.training_utilities,
    "training_utilities_dropout": lambda torch, env: train.training_utilities(torch, env, 0.5),
}


# (over ~1 s each, their builds of larger graphs: in the slow run, for the suite's time)
SLOW = {"fgsm", "transfer_fixed_feature",
        # (~1 s each: variants of programs that run by default, distillation and
        # training_utilities, and the plain CIFAR classifier, a CNN as transfer_finetune's)
        "distillation_kl", "training_utilities_dropout", "cifar_classifier"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n
                                  for n in PROGRAMS])
def test_tutorial(name):
    run_tutorial(PROGRAMS[name])
