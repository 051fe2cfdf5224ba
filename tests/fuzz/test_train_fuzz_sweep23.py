"""Training-program fuzzing against torch, second axis: program k is generate(k) of
tests/fuzz/train_programs_sweep23.py (attention and transformer layers, strided/grouped/
circular convolutions and their transposes, resampling, EmbeddingBag, parametrizations,
checkpoint, a custom autograd.Function, buffers written in forward; the margin, embedding,
Poisson, Gaussian and CTC losses; autocast, a disabled GradScaler, add_param_group, a
save/load round trip, model.apply, augmentations in the step, dict returns, optimiser
flags). Each runs with torch, llgrad eager and its step under llgrad.compile
(tests/fuzz/train_differential_sweep23.py); losses, learning rates, parameters, buffers,
.grad and optimiser state must agree, with no graph break but those ALLOWED_BREAKS names.
Seeds 0-47 (3 steps each) run in every `python -m pytest`, one in six with the step on llvm,
the others on the IR interpreter; seeds 48-299 (5-7 steps), marked slow, on llvm
(LLGRAD_TRAIN_FUZZ23=first:count picks others). Replay a failure with
`python tests/fuzz/train_differential_sweep23.py SEED`."""
import os

import pytest

torch = pytest.importorskip("torch")

from train_differential_sweep23 import check, report  # noqa: E402
from train_programs_sweep23 import QUICK  # noqa: E402

pytestmark = [pytest.mark.fuzz, pytest.mark.usefixtures("throwaway_kernels")]

FAST, ALL = QUICK, 300


def backend_for(seed):
    return "llvm" if seed >= FAST or seed % 6 == 5 else "interpret"


def _seeds():
    spec = os.environ.get("LLGRAD_TRAIN_FUZZ23")
    if spec:
        first, count = (int(x) for x in spec.split(":"))
        return range(first, first + count)
    return range(ALL)


@pytest.mark.parametrize("seed", [s if s < FAST else pytest.param(s, marks=pytest.mark.slow)
                                  for s in _seeds()], ids=lambda s: f"{backend_for(s)}-{s}")
def test_training_program_matches_torch(seed):
    problems = check(seed, backend=backend_for(seed))
    assert not problems, report(seed, problems, backend_for(seed))


def test_programs_draw_every_new_axis():
    """The fast seeds together draw each axis the generator exists for (a generator change
    that stops drawing one shows here, not as silently lost coverage)."""
    from train_programs_sweep23 import generate

    feats = set().union(*(generate(s).features for s in range(FAST)))
    for want in ("attn", "conv1", "conv2", "bag", "ctc", "triplet_margin", "autocast_bf16",
                 "save_load", "add_param_group", "apply_init", "crop_", "flip_", "func", "ckpt",
                 "fused", "return_dict", "tamper_", "mhaadd_bias_kv", "convtranspose2d",
                 "embeddingbag_", "snorm", "orth", "wnorm", "encoder_stack"):
        assert any(f.startswith(want) for f in feats), want
