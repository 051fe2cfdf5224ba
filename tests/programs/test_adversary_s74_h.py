"""Session 74 (h), CTCLoss against torch: blank, zero_infinity, the reductions (mean over the
clamped target lengths), padded and concatenated targets, lengths as tensors, int32 tensors
and tuples, an empty target, unbatched input; MarginRankingLoss, Huber / SmoothL1 (delta,
beta 0, at the kinks, delta 0 raising): torch, llgrad eager and llgrad.compile (adversarial_harness_s69_a10.check), values and every
input and parameter gradient."""
import numpy as np
import pytest

pytest.importorskip("torch")
from adversarial_harness_s69_a10 import check  # noqa: E402
from adversary_s74_h_common import A6, B6, CTC, G, K, TOL, X  # noqa: E402


def ctc_padded(torch, lp):
    F = torch.nn.functional
    t = torch.tensor([[1, 2, 2], [3, 1, 0]])
    il, tl = torch.tensor([6, 5]), torch.tensor([3, 2])
    return (F.ctc_loss(lp, t, il, tl), F.ctc_loss(lp, t, il, tl, reduction="sum"),
            F.ctc_loss(lp, t, il, tl, reduction="none"))


def ctc_concat_tuple_blank(torch, lp):
    F = torch.nn.functional
    t = torch.tensor([1, 2, 2, 0, 1])
    return (F.ctc_loss(lp, t, (6, 5), (3, 2), blank=3),
            F.ctc_loss(lp, t, (6, 4), (3, 2), blank=3, reduction="none"))


def ctc_zero_infinity(torch, lp):
    F = torch.nn.functional
    t = torch.tensor([[1, 1, 1, 1], [2, 2, 2, 2]])
    il, tl = torch.tensor([6, 3]), torch.tensor([2, 4])
    return (torch.nn.CTCLoss(zero_infinity=True, reduction="none")(lp, t, il, tl),
            torch.nn.CTCLoss(zero_infinity=True)(lp, t, il, tl),
            torch.nn.CTCLoss(reduction="none")(lp, t, il, tl))


def ctc_int32_lengths_empty_target(torch, lp):
    F = torch.nn.functional
    t = torch.tensor([[1, 2, 0], [0, 0, 0]], dtype=torch.int32)
    il = torch.tensor([6, 4], dtype=torch.int32)
    tl = torch.tensor([2, 0], dtype=torch.int32)
    return F.ctc_loss(lp, t, il, tl, reduction="none"), F.ctc_loss(lp, t, il, tl, blank=3)


def ctc_unbatched(torch, lp):
    F = torch.nn.functional
    return F.ctc_loss(lp[:, 0], torch.tensor([1, 2, 1]), torch.tensor(6), torch.tensor(3), reduction="none"), \
        F.ctc_loss(lp[:, 1], torch.tensor([2, 2]), (5,), (2,))


def ctc_module_mean_lengths(torch, lp):
    m = torch.nn.CTCLoss(blank=2, reduction="mean", zero_infinity=False)
    t = torch.tensor([0, 1, 1, 3, 0, 3, 1])
    return m(lp, t, torch.tensor([6, 6]), torch.tensor([3, 4])), m(lp[:4], t[:2], (4, 3), (1, 1))


def margin_ranking(torch, a, b):
    y = torch.tensor([1.0, -1.0, 1.0, -1.0, 1.0, 1.0])
    L = torch.nn.MarginRankingLoss
    return L()(a, b, y), L(margin=0.5, reduction="none")(a, b, y), L(margin=-0.2, reduction="sum")(a, b, y)


def huber_smooth_zero(torch, x, t):
    F = torch.nn.functional
    return (F.huber_loss(x, t, delta=0.5), F.huber_loss(x, t, delta=2.0, reduction="none"),
            F.smooth_l1_loss(x, t, beta=0.0), F.smooth_l1_loss(x, t, beta=0.3, reduction="sum"),
            torch.nn.HuberLoss(delta=1e-3, reduction="sum")(x, t))


def kinks_losses(torch, x, t):
    F = torch.nn.functional
    return (F.huber_loss(x, t, delta=1.0, reduction="none"), F.smooth_l1_loss(x, t, beta=0.0, reduction="none"),
            F.smooth_l1_loss(x, t, beta=1.0, reduction="none"), F.l1_loss(x, t, reduction="none"))


def huber_delta_zero_raises(torch, x):
    return torch.nn.functional.huber_loss(x, x * 0, delta=0.0)


CASES = [
    (ctc_padded, [G(CTC)], TOL),
    (ctc_concat_tuple_blank, [G(CTC)], TOL),
    (ctc_zero_infinity, [G(CTC)], TOL),
    (ctc_int32_lengths_empty_target, [G(CTC)], TOL),
    (ctc_unbatched, [G(CTC)], TOL),
    (ctc_module_mean_lengths, [G(CTC)], TOL),
    (margin_ranking, [G(A6), G(B6)], {}),
    (huber_smooth_zero, [G(X), G(X[::-1].copy())], TOL),
    (kinks_losses, [G(K), G(np.array([-7, -3, 0, -0.5, 0, -0.5, 1, 2, 6, 0.75, 0.25, 1], np.float32))], TOL),
    (huber_delta_zero_raises, [G(X)], TOL),
]


@pytest.mark.slow       # (a compile a case)
@pytest.mark.parametrize("fn,specs,kw", CASES, ids=[c[0].__name__ for c in CASES])
def test_ctc_huber(fn, specs, kw):
    check(fn, *specs, **kw)

