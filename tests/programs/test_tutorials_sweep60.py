"""Sweep 60 (H1): tutorial programs of new kinds (tutorials_sweep60.py, _b.py) run with
PyTorch, with llgrad eagerly and with llgrad compiling their steps (tutorial_harness.py):
the same numbers, no warning, compiled code for every step, and about one trace per batch
size or branch outcome each step meets."""
import pytest

torch = pytest.importorskip("torch")

import tutorials_sweep60 as a  # noqa: E402
import tutorials_sweep60_b as b  # noqa: E402
from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch

PROGRAMS = {        # name: (program, most traces of any of its compiled steps)
    "siamese_triplet": (a.siamese_triplet, 1),
    # (the critic step: a trace more once the generator's grads exist)
    "wgan_gp": (a.wgan_gp, 2),
    "unet_dice": (a.unet_dice, 1),
    # (lam, a Python float changing every epoch: a value guard, then an input)
    "mixup_label_smoothing": (a.mixup_label_smoothing, 2),
    # (LambdaLR's step inside the step: its count an input, min()'s outcome guarded)
    "focal_loss_warmup": (a.focal_loss_warmup, 3),
    # (the closure: a trace more once the grads exist)
    "time_sequence_lbfgs": (b.time_sequence_lbfgs, 2),
    "realnvp_flow": (b.realnvp_flow, 1),
    "moe_topk": (b.moe_topk, 1),
    "lora_parametrize": (b.lora_parametrize, 1),
    "maml_sine": (b.maml_sine, 1),
    # (the samplers: the step's int a value guard, then an input (betas[i] and
    # torch.full((n,), i) too: runtime/symbolic_uses.py), `if i == 0` a guarded outcome)
    "tiny_ddpm": (b.tiny_ddpm, 3),
}
SLOW = {"time_sequence_lbfgs", "moe_topk", "unet_dice", "maml_sine"}  # (cold builds: seconds)


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.slow] if n in SLOW
                                               else []) for n in PROGRAMS])
def test_program(name):
    program, max_traces = PROGRAMS[name]
    _, _, compiled = run_tutorial(program)
    for cf in compiled.steps:
        assert cf.n_traces <= max_traces, (getattr(cf, "fn", cf), cf.n_traces)
