"""The sweep-12 tutorial programs (programs_sweep12_*.py), each run with torch, with llgrad
eagerly and with its training step under llgrad.compile (see tutorial_harness.py)."""
import pytest

torch = pytest.importorskip("torch")

import programs_sweep12_a as a  # noqa: E402
import programs_sweep12_b as b  # noqa: E402
import programs_sweep12_c as c  # noqa: E402
import programs_sweep12_d as d  # noqa: E402
import programs_sweep12_e as e  # noqa: E402
import programs_sweep12_f as f  # noqa: E402
import programs_sweep12_g as g  # noqa: E402
import programs_sweep12_h as h  # noqa: E402
from tutorial_harness import run_tutorial  # noqa: E402

pytestmark = pytest.mark.torch

PROGRAMS = {fn.__name__: fn for fn in [
    a.fasttext_bag_offsets, a.char_gru_sampling, a.pointer_generator_copy,
    a.mixture_of_softmaxes, a.t5_relative_bias, a.dpo_preference_loss,
    a.prompt_tuning_frozen, a.tree_lstm_childsum,
    b.slot_attention, b.vq_ema_codebook, b.gatys_style_lbfgs, b.pgd_adversarial_training,
    b.infogan_categorical_code, b.chamfer_pointcloud_ae, b.batch_renorm, b.concrete_dropout,
    c.ffjord_hutchinson, c.deep_ritz_poisson, c.kan_bspline, c.random_fourier_krr,
    c.rbm_contrastive_divergence, c.modern_hopfield, c.koopman_autoencoder,
    c.deq_implicit_hook,
    d.reinforce_baseline, d.cql_conservative_q, d.awr_tanh_gaussian, d.cem_model_planning,
    d.fixmatch_pseudo_labels, d.gradient_centralization, d.lars_optimizer,
    d.factored_optimizer,
    e.gae_link_prediction, e.egnn_equivariant, e.schnet_rbf_filter, e.appnp_propagation,
    e.soft_rank_spearman, e.sparsemax_function, e.proxy_anchor_loss,
    e.center_loss_two_optimizers,
    f.nbeats_basis, f.lru_recurrence, f.rwkv_time_mixing, f.seq2seq_teacher_forcing_ratio,
    f.distillation_temperature, f.factorization_machine, f.multisample_dropout_generator,
    f.progressive_unfreezing,
    g.shared_train_eval_step, g.two_losses_retain_graph, g.tensor_learning_rate,
    g.accumulate_set_to_none_false, g.grad_allow_unused_materialize,
    g.early_stopping_best_state, g.resume_from_checkpoint, g.freeze_by_grad_none,
    h.precise_bn_cumulative, h.rgcn_basis, h.hierarchical_softmax, h.wae_mmd,
    h.td_lambda_traces, h.plateau_step_in_train_step]}

# (the quick ones; the others take over ~0.5 s each with their LLVM builds: the slow run)
FAST = set()
XFAIL = {
    "grad_allow_unused_materialize": "the step returns stack(grads) of an autograd.grad "
                                     "with create_graph=True, whose graph its own backward "
                                     "leaves alive: compile runs such a step eagerly (warns)",
    "multisample_dropout_generator": "bernoulli_(p, generator=g) with a torch.Generator "
                                     "object: a compiled call cannot replay draws from a "
                                     "generator other than the default one; the call runs "
                                     "eagerly (warns)",
    "plateau_step_in_train_step": "ReduceLROnPlateau.step(loss) inside the compiled step: "
                                  "the scheduler's best (a Python float from the loss's "
                                  "value) changes at every traced run, which a compiled call "
                                  "cannot replay: each call traces again, eager at the "
                                  "recompile limit (warns)"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=([pytest.mark.xfail(
    strict=True, reason=XFAIL[n])] if n in XFAIL else []) + ([] if n in FAST
                                                            else [pytest.mark.slow]))
    for n in PROGRAMS])
def test_program(name):
    run_tutorial(PROGRAMS[name])
