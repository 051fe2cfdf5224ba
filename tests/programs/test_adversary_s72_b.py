"""Loss functions with their options at the edges against torch: cross_entropy with
probability targets plus label smoothing plus class weights, on 3-D inputs, every target
ignored; nll_loss on 3-D/4-D inputs; kl_div log_target; margin_ranking, triplet_margin with
swap, multilabel_soft_margin with weights, poisson_nll full=True, gaussian_nll, multi_margin,
cosine/hinge embedding, soft_margin, multilabel_margin, ctc_loss; the exception types of bad
reductions, shapes and options: torch, llgrad eager and llgrad.compile
(adversarial_harness_s69_a10.check)."""
import numpy as np
import pytest

pytest.importorskip("torch")
from adversarial_harness_s69_a10 import check  # noqa: E402

pytestmark = pytest.mark.slow       # (a compile a case)

nan, inf = float("nan"), float("inf")
X = np.array([[2.0, -1.0, 0.5, 0.0], [0.3, 1.0, -2.0, 3.0], [0.0, 0.0, 0.0, 0.0],
              [1.5, -0.5, 0.25, 1.0]], np.float32)


def ce_probs_smoothing_weight(torch, x):
    F = torch.nn.functional
    p = torch.tensor([[0.5, 0.5, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0], [0.25] * 4, [0.1, 0.2, 0.3, 0.4]])
    w = torch.tensor([1.0, 0.5, 2.0, 0.0])
    return (F.cross_entropy(x, p, weight=w, label_smoothing=0.1),
            F.cross_entropy(x, p, weight=w, label_smoothing=0.3, reduction="none"),
            F.cross_entropy(x, p, weight=w, reduction="sum"))


def ce_probs_3d(torch, x):
    F = torch.nn.functional
    y = x.reshape(2, 4, 2)
    p = torch.softmax(torch.arange(16.0).reshape(2, 4, 2) % 3, 1)
    return F.cross_entropy(y, p, label_smoothing=0.2), F.cross_entropy(y, p, reduction="none")


def ce_3d_index_targets(torch, x):
    F = torch.nn.functional
    y = x.reshape(2, 4, 2)
    t = torch.tensor([[0, 3], [-100, 2]])
    w = torch.tensor([1.0, 2.0, 0.5, 1.5])
    return (F.cross_entropy(y, t, weight=w), F.cross_entropy(y, t, weight=w, label_smoothing=0.25),
            F.cross_entropy(y, t, reduction="none", label_smoothing=0.1))


def ce_all_ignored_smoothing_weight(torch, x):
    F = torch.nn.functional
    t = torch.tensor([5, 5, 5, 5])
    w = torch.tensor([1.0, 2.0, 0.5, 1.5])
    return (F.cross_entropy(x, t, ignore_index=5, label_smoothing=0.1, weight=w),
            F.cross_entropy(x, t, ignore_index=5, label_smoothing=0.1, reduction="sum"),
            F.cross_entropy(x, t, ignore_index=5, weight=w, reduction="none"))


def nll_3d_4d(torch, x):
    F = torch.nn.functional
    lp3 = F.log_softmax(x.reshape(1, 4, 4), 1)
    lp4 = F.log_softmax(x.reshape(2, 2, 2, 2), 1)
    t3 = torch.tensor([[0, 3, 1, 1]])
    t4 = torch.tensor([[[0, 1], [1, -100]], [[1, 1], [0, 0]]])
    w = torch.tensor([0.5, 2.0])
    return (F.nll_loss(lp3, t3, ignore_index=1), F.nll_loss(lp4, t4, weight=w),
            F.nll_loss(lp4, t4, reduction="none"), F.nll_loss(lp4, t4, weight=w, reduction="sum"))


def nll_4d_all_ignored(torch, x):
    F = torch.nn.functional
    t = torch.full((2, 2, 2), -100)
    return F.nll_loss(x.reshape(2, 2, 2, 2), t), F.nll_loss(x.reshape(2, 2, 2, 2), t, reduction="sum")


def nll_target_out_of_range_3d(torch, x):
    return torch.nn.functional.nll_loss(x.reshape(1, 4, 4), torch.tensor([[0, 4, 1, 1]]))


def kl_div_log_target(torch, x):
    F = torch.nn.functional
    lp = F.log_softmax(x, 1)
    lt = F.log_softmax(x.flip(0) * 2, 1)
    return (F.kl_div(lp, lt, log_target=True, reduction="batchmean"),
            F.kl_div(lp, lt, log_target=True, reduction="none"),
            F.kl_div(lp, lt.exp(), reduction="mean"))


def smooth_l1_huber_options(torch, x):
    F = torch.nn.functional
    y = x.flip(1) * 0.5
    return (F.smooth_l1_loss(x, y, beta=0.0, reduction="none"), F.huber_loss(x, y, delta=0.25, reduction="sum"),
            F.smooth_l1_loss(x, y, beta=2.0, reduction="none"), F.huber_loss(x, x, delta=0.5))


def margin_ranking(torch, x):
    F = torch.nn.functional
    y = torch.tensor([1.0, -1.0, 1.0, -1.0])
    return (F.margin_ranking_loss(x[0], x[1], y), F.margin_ranking_loss(x[0], x[1], y, margin=0.5, reduction="none"),
            F.margin_ranking_loss(x[2], x[3], y, margin=-1.0, reduction="sum"))


def triplet_swap(torch, x):
    F = torch.nn.functional
    a, p, n = x[:2], x[1:3], x[2:]
    return (F.triplet_margin_loss(a, p, n, swap=True), F.triplet_margin_loss(a, p, n, margin=0.3, p=1, swap=True, reduction="none"),
            F.triplet_margin_loss(a, p, n, p=3, eps=0.0, reduction="sum"))


def triplet_with_distance(torch, x):
    F = torch.nn.functional
    d = lambda u, v: (u - v).abs().sum(-1)  # noqa: E731
    a, p, n = x[:2], x[1:3], x[2:]
    return (F.triplet_margin_with_distance_loss(a, p, n, distance_function=d, swap=True),
            F.triplet_margin_with_distance_loss(a, p, n, margin=2.0, reduction="none"))


def multilabel_soft_margin_weight(torch, x):
    F = torch.nn.functional
    t = torch.tensor([[1.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0], [0.0, 1.0, 0.0, 1.0]])
    w = torch.tensor([1.0, 0.0, 2.0, 0.5])
    return (F.multilabel_soft_margin_loss(x, t, weight=w), F.multilabel_soft_margin_loss(x, t, weight=w, reduction="none"),
            F.multilabel_soft_margin_loss(x, t, reduction="sum"))


def poisson_nll_full(torch, x):
    F = torch.nn.functional
    t = torch.tensor([[0.0, 1.0, 2.0, 5.0]] * 4)
    return (F.poisson_nll_loss(x, t, full=True), F.poisson_nll_loss(x.exp(), t, log_input=False, full=True, reduction="none"),
            F.poisson_nll_loss(x.abs(), t, log_input=False, eps=1e-3, reduction="sum"))


def gaussian_nll_options(torch, x):
    F = torch.nn.functional
    t = x.flip(0)
    v = torch.tensor([[0.5], [1.0], [2.0], [1e-9]])
    return (F.gaussian_nll_loss(x, t, v, full=True), F.gaussian_nll_loss(x, t, v.expand(4, 4) * 1, eps=1e-2, reduction="none"),
            F.gaussian_nll_loss(x, t, x.exp(), reduction="sum"))


def gaussian_nll_negative_var_raises(torch, x):
    return torch.nn.functional.gaussian_nll_loss(x, x, -torch.ones(4, 4))


def multi_margin_options(torch, x):
    F = torch.nn.functional
    t = torch.tensor([0, 3, 2, 1])
    w = torch.tensor([1.0, 0.5, 2.0, 0.0])
    return (F.multi_margin_loss(x, t), F.multi_margin_loss(x, t, p=2, margin=0.5, weight=w, reduction="none"),
            F.multi_margin_loss(x, t, weight=w, reduction="sum"))


def embedding_losses(torch, x):
    F = torch.nn.functional
    y = torch.tensor([1.0, -1.0, -1.0, 1.0])
    z = x * torch.tensor([[1.0], [1.0], [0.0], [1.0]])
    return (F.cosine_embedding_loss(z, x.flip(0), y), F.cosine_embedding_loss(z, x.flip(0), y, margin=0.2, reduction="none"),
            F.hinge_embedding_loss(x, torch.tensor([1.0, -1.0, -1.0, 1.0]), margin=0.5, reduction="none"),
            F.hinge_embedding_loss(x, -torch.ones(4)))


def soft_and_multilabel_margin(torch, x):
    F = torch.nn.functional
    s = torch.tensor([[1.0, -1.0, 1.0, -1.0]] * 4)
    t = torch.tensor([[3, 0, -1, 1], [-1, 2, 0, 0], [0, 1, 2, 3], [2, 2, -1, 3]])
    return (F.soft_margin_loss(x, s), F.soft_margin_loss(x, s, reduction="none"),
            F.multilabel_margin_loss(x, t), F.multilabel_margin_loss(x, t, reduction="none"))


def bce_weight_broadcast(torch, x):
    F = torch.nn.functional
    t = torch.tensor([[1.0, 0.0, 0.5, 1.0]] * 4)
    w = torch.tensor([1.0, 2.0, 0.0, 0.5])
    return (F.binary_cross_entropy(torch.sigmoid(x), t, weight=w), F.binary_cross_entropy_with_logits(x, t, weight=w.unsqueeze(1), reduction="none"),
            F.binary_cross_entropy_with_logits(x, t, weight=w, pos_weight=torch.tensor(3.0), reduction="sum"))


def ctc_small(torch, x):
    F = torch.nn.functional
    lp = F.log_softmax(x.reshape(4, 1, 4).expand(4, 2, 4) * torch.tensor([[1.0], [0.5]]), 2)
    t = torch.tensor([[1, 2], [3, 3]])
    il, tl = torch.tensor([4, 4]), torch.tensor([2, 2])
    return (F.ctc_loss(lp, t, il, tl), F.ctc_loss(lp, t, il, tl, reduction="none"),
            F.ctc_loss(lp, t, torch.tensor([4, 3]), torch.tensor([2, 1]), reduction="sum", zero_infinity=True))


def ctc_impossible(torch, x):
    F = torch.nn.functional
    lp = F.log_softmax(x.reshape(4, 1, 4), 2)
    t = torch.tensor([[1, 1, 1]])
    il, tl = torch.tensor([4]), torch.tensor([3])
    return F.ctc_loss(lp, t, il, tl, reduction="none"), F.ctc_loss(lp, t, il, tl, zero_infinity=True, reduction="none")


def ce_neg_ignore_index_empty_batch(torch, x):
    F = torch.nn.functional
    t = torch.tensor([0, -1, 2, -1])
    return (F.cross_entropy(x, t, ignore_index=-1, label_smoothing=0.1), F.nll_loss(F.log_softmax(x, 1), t, ignore_index=-1, reduction="none"),
            F.cross_entropy(x[:0], x[:0].softmax(1)), F.cross_entropy(x[:0], t[:0], reduction="none"))


def kl_log_target_neg_inf(torch, x):
    F = torch.nn.functional
    lt = torch.tensor([[-inf, 0.0, -inf, -inf]] * 4)
    return F.kl_div(F.log_softmax(x, 1), lt, log_target=True, reduction="none"), F.kl_div(F.log_softmax(x, 1), lt.exp(), reduction="batchmean")


CASES = [ce_probs_smoothing_weight, ce_probs_3d, ce_3d_index_targets, ce_all_ignored_smoothing_weight,
         nll_3d_4d, nll_4d_all_ignored, nll_target_out_of_range_3d, kl_div_log_target,
         smooth_l1_huber_options, margin_ranking, triplet_swap, triplet_with_distance,
         multilabel_soft_margin_weight, poisson_nll_full, gaussian_nll_options,
         gaussian_nll_negative_var_raises, multi_margin_options, embedding_losses,
         soft_and_multilabel_margin, bce_weight_broadcast, ctc_small, ctc_impossible,
         ce_neg_ignore_index_empty_batch, kl_log_target_neg_inf]


@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
@pytest.mark.parametrize("grad", [False, True])
def test_losses(fn, grad):
    check(fn, ("grad", X.copy()) if grad else X.copy(), rtol=1e-5, atol=1e-6)


# (the errors: PyTorch's exception type for a bad option or shape, each loss its own)
ERRORS = {
    "mse_bad_reduction": lambda torch, F, x, t: F.mse_loss(x, x, reduction="foo"),
    "ce_batchmean_reduction": lambda torch, F, x, t: F.cross_entropy(x, t, reduction="batchmean"),
    "nll_elementwise_mean": lambda torch, F, x, t: F.nll_loss(x, t, reduction="elementwise_mean"),
    "kl_bad_reduction": lambda torch, F, x, t: F.kl_div(x, x, reduction="foo"),
    "margin_bad_reduction": lambda torch, F, x, t: F.margin_ranking_loss(x, x, x, reduction="foo"),
    "ctc_bad_reduction": lambda torch, F, x, t: F.ctc_loss(x.reshape(4, 1, 4).log_softmax(2), torch.tensor([[1]]), (4,), (1,), reduction="foo"),
    "nll_batch_mismatch": lambda torch, F, x, t: F.nll_loss(x, t[:3]),
    "ce_3d_target_mismatch": lambda torch, F, x, t: F.cross_entropy(x.reshape(2, 4, 2), torch.zeros(2, 3, dtype=torch.long)),
    "bce_size_mismatch": lambda torch, F, x, t: F.binary_cross_entropy(x.sigmoid(), torch.ones(4, 1)),
    "multi_margin_p3": lambda torch, F, x, t: F.multi_margin_loss(x, t, p=3),
    "gaussian_var_shape": lambda torch, F, x, t: F.gaussian_nll_loss(x, x, torch.ones(4, 2)),
    "ce_negative_smoothing": lambda torch, F, x, t: F.cross_entropy(x, t, label_smoothing=-0.1),
    "multilabel_margin_oob": lambda torch, F, x, t: F.multilabel_margin_loss(x, torch.tensor([[4, -1, 0, 0]] * 4)),
    "huber_zero_delta": lambda torch, F, x, t: F.huber_loss(x, x * 2, delta=0.0),
    "smooth_l1_negative_beta": lambda torch, F, x, t: F.smooth_l1_loss(x, x * 2, beta=-1.0),
    "margin_ranking_shapes": lambda torch, F, x, t: F.margin_ranking_loss(x[0], x[1], torch.ones(3)),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_loss_errors(name):
    def fn(torch, x):
        return ERRORS[name](torch, torch.nn.functional, x, torch.tensor([0, 1, 2, 3]))
    fn.__name__ = name
    check(fn, X.copy())
