"""Session 74 (h), probabilistic losses against torch: PoissonNLL (log_input False, full: the
Stirling term for targets > 1, zero inputs), GaussianNLL (full, eps clamping with the
identity gradient, var broadcast, negative var raising), KLDiv (log_target, batchmean, the
'mean' warning, zero targets), BCE / BCEWithLogits (weight and pos_weight broadcast,
extremes, a target's gradient), cross_entropy with probabilities as target and label
smoothing (2-D and 4-D), AdaptiveLogSoftmaxWithLoss (head_bias, log_prob, predict): torch, llgrad eager and llgrad.compile (adversarial_harness_s69_a10.check), values and every
input and parameter gradient."""
import numpy as np
import pytest

pytest.importorskip("torch")
from adversarial_harness_s69_a10 import check  # noqa: E402
from adversary_s74_h_common import (  # noqa: E402
    _fill, CNT, G, IMG, LP, pg, PH, T01, TOL, TP, VAR, X)


def poisson_nll(torch, x, t):
    L = torch.nn.PoissonNLLLoss
    return (L()(x, t), L(log_input=False)(x.abs() + 0.1, t), L(full=True, reduction="none")(x, t),
            L(log_input=False, full=True, eps=0.5, reduction="sum")(x.abs(), t))


def gaussian_nll(torch, x, t, var):
    L = torch.nn.GaussianNLLLoss
    return (L()(x, t, var), L(full=True, eps=0.1, reduction="none")(x, t, var),
            L(reduction="sum")(x, t, var[:, :1]), L()(x, t, var[:, 0]))


def kl_div(torch, lp, t):
    F = torch.nn.functional
    return (F.kl_div(lp, t, reduction="batchmean"), F.kl_div(lp, t.log(), log_target=True, reduction="sum"),
            F.kl_div(lp, t, reduction="none"), F.kl_div(lp, t.log(), log_target=True, reduction="batchmean"))


def kl_div_mean_warns(torch, lp, t):
    import warnings
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        r = torch.nn.KLDivLoss()(lp, t)
    return r, torch.nn.KLDivLoss(reduction="batchmean")(lp, t)


def bce_weight_broadcast(torch, p, t):
    F = torch.nn.functional
    w = torch.linspace(0.5, 1.5, 6)
    return (F.binary_cross_entropy(p, t, weight=w), F.binary_cross_entropy(p, t, weight=w[:1], reduction="none"),
            torch.nn.BCELoss(weight=torch.tensor([[1.0], [2.0], [0.0], [0.5]]), reduction="sum")(p, t))


def bce_logits_pos_weight(torch, x, t):
    F = torch.nn.functional
    pw = torch.linspace(0.5, 3.0, 6)
    w = torch.tensor([[1.0], [2.0], [0.0], [0.5]])
    return (F.binary_cross_entropy_with_logits(x, t, pos_weight=pw),
            F.binary_cross_entropy_with_logits(x, t, pos_weight=pw, weight=w, reduction="none"),
            torch.nn.BCEWithLogitsLoss(pos_weight=torch.tensor([2.0]), reduction="sum")(x, t))


def ce_prob_smoothing(torch, x):
    F = torch.nn.functional
    p = torch.softmax(torch.arange(24.).reshape(4, 6) % 5, 1)
    w = torch.linspace(0.5, 2.0, 6)
    return (F.cross_entropy(x, p, label_smoothing=0.2), F.cross_entropy(x, p, weight=w, label_smoothing=0.1, reduction="none"),
            F.cross_entropy(x, p, weight=w, reduction="sum"))


def ce_prob_4d_smoothing(torch, x):
    F = torch.nn.functional
    p = torch.softmax(torch.arange(96.).reshape(2, 3, 4, 4) % 7, 1)
    return F.cross_entropy(x, p, label_smoothing=0.3), F.cross_entropy(x, p, label_smoothing=0.3, reduction="none")


def adaptive_log_softmax(torch, x):
    m = _fill(torch, torch.nn.AdaptiveLogSoftmaxWithLoss(6, 10, cutoffs=[3, 6], div_value=2.0))
    t = torch.tensor([0, 4, 9, 7])
    r = m(x, t)
    return r.output, r.loss, m.log_prob(x), m.predict(x), pg(torch, r.loss.reshape(1), m)


def adaptive_log_softmax_head_bias(torch, x):
    m = _fill(torch, torch.nn.AdaptiveLogSoftmaxWithLoss(6, 8, cutoffs=[2], head_bias=True))
    r = m(x[0], torch.tensor(5))
    return r.output, r.loss, pg(torch, r.loss.reshape(1), m)


def bce_target_grad_raises(torch, p, t):
    return torch.nn.functional.binary_cross_entropy(p, t)


def poisson_stirling(torch, x):
    t = torch.tensor([0.0, 1.0, 1.5, 2.0, 5.0, 0.5])
    L = torch.nn.PoissonNLLLoss
    return L(full=True, reduction="none")(x, t), L(log_input=False, full=True, reduction="none")(x.abs(), t)


def gaussian_var_last_dim_one(torch, x, v):
    return torch.nn.GaussianNLLLoss(reduction="none")(x, x.flip(0), v[:, :1]), \
        torch.nn.functional.gaussian_nll_loss(x, x.flip(0), v[:, 0], full=True, reduction="none")


def gaussian_bad_var_raises(torch, x, v):
    return torch.nn.GaussianNLLLoss()(x, x * 0.5, -v)


def ce_prob_target_grad(torch, x, p):
    return torch.nn.functional.cross_entropy(x, p.softmax(1), label_smoothing=0.25)


def kl_zero_target(torch, lp):
    t = torch.tensor([[0.0, 0.5, 0.5, 0.0, 0.0]] * 4)
    F = torch.nn.functional
    return F.kl_div(lp, t, reduction="none"), F.kl_div(lp, t, reduction="sum"), F.kl_div(lp, lp * 2, log_target=True, reduction="none")


def bce_extremes(torch, x):
    F = torch.nn.functional
    p = torch.tensor([[0.0, 1.0, 0.5, 1e-30, 1.0 - 1e-7, 0.3]])
    t = torch.tensor([[0.0, 1.0, 1.0, 1.0, 0.0, 0.3]])
    z = x * 100
    return (F.binary_cross_entropy(p, t, reduction="none"),
            F.binary_cross_entropy_with_logits(z, t.expand(4, 6), pos_weight=torch.tensor([3.0]), reduction="none"),
            F.binary_cross_entropy_with_logits(z, t.expand(4, 6)))


def gaussian_var_clamp_grad(torch, x, v):
    L = torch.nn.GaussianNLLLoss
    return L(eps=0.1, reduction="none")(x, x.flip(0) * 0.5, v), L(eps=1e-6, full=True)(x, x * 0, v)


def poisson_zero_input(torch, x):
    t = torch.tensor([0.0, 1.0, 3.0, 0.0, 2.0, 1.0])
    return torch.nn.PoissonNLLLoss(log_input=False, reduction="none", eps=1e-3)(x, t), torch.nn.PoissonNLLLoss(log_input=False, full=True)(x, t)


CASES = [
    (poisson_nll, [G(X), CNT], TOL),
    (gaussian_nll, [G(X), X[::-1].copy(), G(VAR)], TOL),
    (kl_div, [G(LP), G(TP)], TOL),
    (kl_div_mean_warns, [G(LP), TP], dict(TOL, compiled_warns="batchmean")),
    (bce_weight_broadcast, [G(PH), T01], TOL),
    (bce_logits_pos_weight, [G(X), T01], TOL),
    (ce_prob_smoothing, [G(X)], TOL),
    (ce_prob_4d_smoothing, [G(IMG)], TOL),
    (adaptive_log_softmax, [G(X)], TOL),
    (adaptive_log_softmax_head_bias, [G(X)], TOL),
    (bce_target_grad_raises, [G(PH), G(T01)], TOL),
    (poisson_stirling, [G(X)], TOL),
    (gaussian_var_last_dim_one, [G(X), G(np.abs(X) + 0.1)], TOL),
    (gaussian_bad_var_raises, [G(X), G(np.abs(X) + 0.1)], TOL),
    (ce_prob_target_grad, [G(X), G(X[::-1].copy())], TOL),
    (kl_zero_target, [G(LP)], TOL),
    (bce_extremes, [G(X)], TOL),
    (gaussian_var_clamp_grad, [G(X), G((np.arange(24, dtype=np.float32).reshape(4, 6) % 4) * 0.03)], TOL),
    (poisson_zero_input, [G(np.array([0.0, 0.0, 1.0, 2.0, 0.5, 1e-5], np.float32))], TOL),
]


@pytest.mark.slow       # (a compile a case)
@pytest.mark.parametrize("fn,specs,kw", CASES, ids=[c[0].__name__ for c in CASES])
def test_probability_losses(fn, specs, kw):
    check(fn, *specs, **kw)

