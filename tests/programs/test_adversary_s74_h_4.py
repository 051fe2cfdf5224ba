"""Session 74 (h), margin and pairwise losses against torch: MultiLabelMargin (-1 ends, 1-D),
MultiLabelSoftMargin (weight), MultiMargin (p 1 / 2, margin, weight, ties, p 3 raising),
HingeEmbedding / SoftMargin (targets other than +-1), TripletMarginWithDistance (custom
distance, swap, PairwiseDistance eps), CosineEmbedding (zero vectors, 1-D), 4-D NLL with
weight and ignore_index (every weight ignored: NaN), legacy size_average / reduce: torch, llgrad eager and llgrad.compile (adversarial_harness_s69_a10.check), values and every
input and parameter gradient."""
import numpy as np
import pytest

pytest.importorskip("torch")
from adversarial_harness_s69_a10 import check  # noqa: E402
from adversary_s74_h_common import G, IMG, TOL, X  # noqa: E402


def multilabel_margin(torch, x):
    y = torch.tensor([[3, 0, -1, 1, 2, 5], [1, 2, 3, 4, 5, 0], [-1, 0, 0, 0, 0, 0], [5, 5, -1, 0, 0, 0]])
    L = torch.nn.MultiLabelMarginLoss
    return L()(x, y), L(reduction="none")(x, y), L(reduction="sum")(x[0], y[0])


def multilabel_soft_margin_weight(torch, x):
    y = torch.tensor([[1, 0, 1, 0, 0, 1], [0] * 6, [1] * 6, [0, 1, 0, 1, 1, 0]]).float()
    w = torch.linspace(0.5, 2.0, 6)
    L = torch.nn.MultiLabelSoftMarginLoss
    return L(weight=w)(x, y), L(weight=w, reduction="none")(x, y), L(reduction="sum")(x, y)


def multi_margin(torch, x):
    y = torch.tensor([0, 5, 2, 2])
    w = torch.linspace(0.5, 2.0, 6)
    L = torch.nn.MultiMarginLoss
    return (L()(x, y), L(p=2, margin=0.7)(x, y), L(p=1, weight=w, reduction="none")(x, y),
            L(p=2, weight=w, margin=2.0, reduction="sum")(x, y))


def hinge_soft_margin(torch, x):
    y = torch.tensor([[1.0, -1.0, 1.0, -1.0, -1.0, 1.0]]).expand(4, 6)
    return (torch.nn.HingeEmbeddingLoss()(x, y), torch.nn.HingeEmbeddingLoss(margin=0.3, reduction="none")(x, y),
            torch.nn.SoftMarginLoss()(x, y), torch.nn.SoftMarginLoss(reduction="none")(x, y))


def triplet_distance(torch, a, p, n):
    L = torch.nn.TripletMarginWithDistanceLoss
    cos = lambda u, v: 1.0 - torch.nn.functional.cosine_similarity(u, v)
    return (L()(a, p, n), L(distance_function=cos, margin=0.5)(a, p, n),
            L(distance_function=cos, swap=True, reduction="none")(a, p, n),
            L(swap=True, margin=2.0, reduction="sum")(a, p, n),
            torch.nn.TripletMarginLoss(p=1, swap=True, reduction="none")(a, p, n))


def cosine_embedding(torch, a, b):
    y = torch.tensor([1, -1, 1, -1])
    L = torch.nn.CosineEmbeddingLoss
    return L()(a, b, y), L(margin=0.2, reduction="none")(a, b, y), L(margin=-0.5, reduction="sum")(a, b, y)


def nll_4d(torch, x):
    F = torch.nn.functional
    lp = F.log_softmax(x, 1)
    t = torch.tensor([[[0, 1, 2, 1], [2, 2, 0, 1], [1, 0, 0, 2], [2, 1, 1, 0]]] * 2)
    w = torch.tensor([0.5, 2.0, 1.0])
    return (F.nll_loss(lp, t, weight=w, ignore_index=1), F.nll_loss(lp, t, weight=w, reduction="none"),
            torch.nn.NLLLoss(ignore_index=0, reduction="sum")(lp, t), F.cross_entropy(x, t, weight=w, ignore_index=2))


def losses_1d(torch, a, b):
    y = torch.tensor(1)
    return (torch.nn.CosineEmbeddingLoss(margin=0.1)(a, b, torch.tensor(-1)), torch.nn.CosineEmbeddingLoss()(a, b, y),
            torch.nn.MultiLabelMarginLoss()(a, torch.tensor([2, 0, -1, 1, 1, 1])),
            torch.nn.MultiMarginLoss(p=2)(a, torch.tensor(3)), torch.nn.MultiMarginLoss(reduction="none")(a[None], torch.tensor([1])),
            torch.nn.Bilinear(6, 6, 2, bias=True)(a, b).shape, torch.nn.functional.kl_div(a.log_softmax(0), b.softmax(0), reduction="batchmean"))


def multimargin_p3_raises(torch, x):
    return torch.nn.MultiMarginLoss(p=3)(x, torch.tensor([0, 1, 2, 3]))


def nll_4d_all_weight_ignored(torch, x):
    F = torch.nn.functional
    t = torch.ones(2, 4, 4, dtype=torch.long)
    return F.nll_loss(F.log_softmax(x, 1), t, ignore_index=1), F.nll_loss(F.log_softmax(x, 1), t, weight=torch.tensor([1.0, 0.0, 1.0]))


def hinge_target_zero(torch, x):
    t = torch.tensor([[1.0, -1.0, 0.0, 2.0, -1.0, 0.5]] * 4)
    return (torch.nn.HingeEmbeddingLoss(margin=0.5, reduction="none")(x, t), torch.nn.HingeEmbeddingLoss(margin=-0.5)(x, t),
            torch.nn.SoftMarginLoss(reduction="none")(x, t))


def cosine_zero_vectors(torch, a, b):
    y = torch.tensor([1, -1, 1, -1])
    z = a * torch.tensor([[0.0], [1.0], [0.0], [1.0]])
    return torch.nn.CosineEmbeddingLoss(reduction="none")(z, b, y), torch.nn.functional.cosine_similarity(z, b)


def multimargin_ties(torch, x):
    y = torch.tensor([0, 1, 2, 3])
    return (torch.nn.MultiMarginLoss(reduction="none")(x, y), torch.nn.MultiMarginLoss(p=2, margin=0.0, reduction="none")(x, y),
            torch.nn.MultiLabelMarginLoss(reduction="none")(x, torch.tensor([[0, -1, 0, 0, 0, 0], [1, 2, -1, 0, 0, 0], [2, 2, 2, -1, 0, 0], [0, 1, 2, 3, 4, 5]])))


def triplet_eps_p(torch, a, p, n):
    F = torch.nn.functional
    return (F.triplet_margin_loss(a, p, n, p=3, eps=0.1, reduction="none"), F.triplet_margin_loss(a, a, n, swap=True, reduction="none"),
            F.triplet_margin_with_distance_loss(a, p, n, distance_function=torch.nn.PairwiseDistance(p=1, eps=0.5), swap=True, reduction="none"),
            F.triplet_margin_loss(a, p, n, margin=0.05))


def legacy_size_average(torch, x, t):
    nn = torch.nn
    return (nn.MSELoss(size_average=False)(x, t), nn.L1Loss(reduce=False)(x, t), nn.SmoothL1Loss(size_average=True, reduce=True)(x, t),
            nn.MarginRankingLoss(size_average=False)(x[0], t[0], torch.ones(6)), nn.KLDivLoss(reduce=False)(x, t.abs()),
            nn.PoissonNLLLoss(size_average=False)(x, t.abs()), nn.HingeEmbeddingLoss(reduce=False, size_average=False)(x, t.sign()),
            nn.MultiMarginLoss(size_average=False)(x, torch.tensor([0, 1, 2, 3])), nn.NLLLoss(size_average=False)(x, torch.tensor([0, 1, 2, 3])),
            nn.CrossEntropyLoss(reduce=False)(x, torch.tensor([0, 1, 2, 3])), nn.BCEWithLogitsLoss(size_average=False)(x, t.sigmoid()),
            nn.SoftMarginLoss(reduce=False)(x, t.sign()), nn.CosineEmbeddingLoss(size_average=False)(x, t, torch.tensor([1, -1, 1, 1])),
            nn.MultiLabelSoftMarginLoss(reduce=False)(x, t.sigmoid()), nn.TripletMarginLoss(size_average=False)(x, t, x.flip(0)),
            nn.HuberLoss(reduction="sum")(x, t), nn.SmoothL1Loss(size_average=False, beta=0.5)(x, t),
            nn.MSELoss(reduction="sum").reduction, nn.L1Loss(size_average=False).reduction, nn.NLLLoss(reduce=False).reduction)


CASES = [
    (multilabel_margin, [G(X)], TOL),
    (multilabel_soft_margin_weight, [G(X)], TOL),
    (multi_margin, [G(X)], TOL),
    (hinge_soft_margin, [G(X)], TOL),
    (triplet_distance, [G(X), G(X[::-1].copy()), G(X * 0.5)], TOL),
    (cosine_embedding, [G(X), G(X[:, ::-1].copy())], TOL),
    (nll_4d, [G(IMG)], TOL),
    (losses_1d, [G(X[0].copy()), G(X[2].copy())], TOL),
    (multimargin_p3_raises, [G(X)], TOL),
    (nll_4d_all_weight_ignored, [G(IMG)], TOL),
    (hinge_target_zero, [G(X)], TOL),
    (cosine_zero_vectors, [G(X), G(X[::-1].copy())], TOL),
    (multimargin_ties, [G(np.array([[1, 0, 1, 0, 0, 0], [0, 1, 0, 0, 0, 0], [0.5, 0.5, 1, 0, 2, 0], [0, 0, 0, 0, 0, 0]], np.float32))], TOL),
    (triplet_eps_p, [G(X), G(X[::-1].copy()), G(X * 0.5)], TOL),
    (legacy_size_average, [G(X), X[::-1].copy()], dict(TOL, compiled_warns="")),
]


@pytest.mark.slow       # (a compile a case)
@pytest.mark.parametrize("fn,specs,kw", CASES, ids=[c[0].__name__ for c in CASES])
def test_margin_losses(fn, specs, kw):
    check(fn, *specs, **kw)

