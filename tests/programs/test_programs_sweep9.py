"""The sweep-9 tutorial programs (programs_sweep9_*.py), each run with torch, with llgrad
eagerly and with its training step under llgrad.compile (see tutorial_harness.py)."""
import pytest

torch = pytest.importorskip("torch")

import programs_sweep9_a as a  # noqa: E402
import programs_sweep9_b as b  # noqa: E402
import programs_sweep9_c as c  # noqa: E402
import programs_sweep9_e as e  # noqa: E402
import programs_sweep9_f as f  # noqa: E402
import programs_sweep9_g as g  # noqa: E402
from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch

PROGRAMS = {f.__name__: f for f in [
    a.graphsage_scatter_reduce, a.mean_teacher_lerp, a.exprnn_matrix_exp,
    a.masked_missing_targets, a.trimmed_loss_kthvalue, a.attention_mil_bags,
    b.pix2pix_patchgan, b.contractive_autoencoder, b.retinanet_focal_loss, b.ppo_beta_policy,
    b.adain_style, b.td3_delayed_policy,
    c.hf_style_trainer, c.lightning_style_module, c.batch_hard_triplet, c.echo_state_ridge,
    c.deepar_gaussian, c.r1_lazy_regularisation,
    e.head_swap_new_optimizer, e.hook_between_calls, e.add_param_group_unfreeze,
    e.ema_python_counter, e.compiled_eval_between_steps,
    f.sliced_score_matching, f.bpr_implicit_feedback, f.coral_ordinal, f.tied_autoencoder,
    f.mha_key_padding, f.ragged_last_batch_loader,
    g.gin_graph_classification, g.m5_raw_audio, g.nmf_projected, g.fitnets_hints]}

# (over ~1.5 s each with their LLVM builds, on a machine the suite shares: in the slow run)
SLOW = {"deepar_gaussian", "graphsage_scatter_reduce", "ppo_beta_policy", "pix2pix_patchgan",
        "attention_mil_bags", "hf_style_trainer", "contractive_autoencoder",
        "retinanet_focal_loss", "mha_key_padding", "r1_lazy_regularisation",
        "gin_graph_classification", "m5_raw_audio", "sliced_score_matching", "fitnets_hints",
        "adain_style"}
XFAIL = {}
RTOL = {}


@pytest.mark.parametrize("name", [pytest.param(n, marks=([pytest.mark.xfail(
    strict=True, reason=XFAIL[n])] if n in XFAIL else []) + ([pytest.mark.slow] if n in SLOW
                                                            else [])) for n in PROGRAMS])
def test_program(name):
    run_tutorial(PROGRAMS[name], rtol=RTOL.get(name, 1e-5))
