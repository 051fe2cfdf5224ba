"""nn.functional at its edges against torch: cross_entropy with every target ignored, with
-inf logits, label smoothing and class weights; nll_loss with weights summing to 0;
embedding's padding_idx with repeated indices; pooling over NaN and -inf windows;
layer/group norm of constant rows; dropout p=0 and p=1; batch_norm over one value; losses on
empty batches: torch, llgrad eager and llgrad.compile (adversarial_harness_s69_a10.check)."""
import numpy as np
import pytest

pytest.importorskip("torch")
from adversarial_harness_s69_a10 import check  # noqa: E402

pytestmark = pytest.mark.slow       # (a compile a case; the fast regressions are in
# test_adversarial_regressions_s69_a10.py)

nan, inf = float("nan"), float("inf")
LOGITS = np.array([[2.0, -1.0, 0.5, 0.0], [-inf, 1.0, -inf, 3.0], [0.0, 0.0, 0.0, 0.0],
                   [100.0, -100.0, 50.0, 1.0]], np.float32)


def ce_all_ignored(torch, x):
    F = torch.nn.functional
    t = torch.tensor([-100, -100, -100, -100])
    return F.cross_entropy(x, t), F.cross_entropy(x, t, reduction="sum"), F.cross_entropy(x, t, reduction="none")


def ce_some_ignored_weights(torch, x):
    F = torch.nn.functional
    t = torch.tensor([0, 3, 2, 1])
    w = torch.tensor([1.0, 0.0, 2.0, 0.5])
    return (F.cross_entropy(x, t, weight=w), F.cross_entropy(x, t, ignore_index=2),
            F.cross_entropy(x, t, weight=w, ignore_index=3, reduction="none"),
            F.cross_entropy(x, torch.tensor([1, 1, 1, 1]), weight=w))


def ce_target_at_neg_inf(torch, x):
    F = torch.nn.functional
    return F.cross_entropy(x, torch.tensor([0, 0, 1, 2]), reduction="none")


def ce_label_smoothing(torch, x):
    F = torch.nn.functional
    t = torch.tensor([0, 3, -100, 1])
    w = torch.tensor([1.0, 0.5, 2.0, 0.5])
    return (F.cross_entropy(x[:1], t[:1], label_smoothing=0.1), F.cross_entropy(x[2:], t[2:], label_smoothing=0.3, weight=w),
            F.cross_entropy(x[2:], t[2:], label_smoothing=1.0, reduction="none"))


def ce_label_smoothing_ignored_neg_inf(torch, x):
    F = torch.nn.functional
    t = torch.tensor([3, -100, 1, 0])
    return (F.cross_entropy(x, t, label_smoothing=0.2), F.cross_entropy(x, t, label_smoothing=0.2, reduction="none"),
            F.cross_entropy(x, torch.tensor([3, 0, 1, 0]), ignore_index=0, label_smoothing=0.5, reduction="sum"))


def ce_probabilities(torch, x):
    F = torch.nn.functional
    p = torch.tensor([[0.5, 0.5, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0], [0.25] * 4, [1.0, 0.0, 0.0, 0.0]])
    return F.cross_entropy(x[2:], p[2:]), F.cross_entropy(x[2:], p[2:], label_smoothing=0.2, reduction="none")


def ce_bad_target_raises(torch, x):
    return torch.nn.functional.cross_entropy(x, torch.tensor([0, 4, 1, 1]))


def nll_weights_zero_sum(torch, x):
    F = torch.nn.functional
    lp = F.log_softmax(x[2:], 1)
    return F.nll_loss(lp, torch.tensor([1, 1]), weight=torch.tensor([1.0, 0.0, 1.0, 1.0]))


def bce_edges(torch, x):
    F = torch.nn.functional
    p = torch.sigmoid(x[2:])
    t = torch.tensor([[0.0, 1.0, 0.5, 1.0], [1.0, 0.0, 1.0, 0.0]])
    return (F.binary_cross_entropy(p, t), F.binary_cross_entropy_with_logits(x[2:], t, pos_weight=torch.tensor([1.0, 2.0, 0.0, 3.0])),
            F.binary_cross_entropy(torch.tensor([0.0, 1.0]) * 1, torch.tensor([0.0, 1.0])))


def losses_empty_batch(torch, x):
    F = torch.nn.functional
    e = x[:0]
    return F.mse_loss(e, e), F.l1_loss(e, e, reduction="sum"), F.cross_entropy(e, torch.zeros(0, dtype=torch.long)), F.smooth_l1_loss(e, e, reduction="none")


def huber_smooth_l1_edges(torch, x):
    F = torch.nn.functional
    y = x[2:] + 1
    return F.smooth_l1_loss(x[2:], y, beta=0.0), F.huber_loss(x[2:], y, delta=1.0), F.smooth_l1_loss(x[2:], y, beta=1.0), F.l1_loss(x[2:], x[2:])


def embedding_padding_repeated(torch, x):
    F = torch.nn.functional
    idx = torch.tensor([[1, 1, 3], [3, 0, 1]])
    return F.embedding(idx, x, padding_idx=1), F.embedding(idx, x, padding_idx=-1), F.embedding(idx, x, max_norm=None)


def pooling_nan_windows(torch, x):
    F = torch.nn.functional
    y = x.reshape(1, 1, 4, 4)
    return F.max_pool2d(y, 2), F.max_pool2d(y, 2, 1, return_indices=True), F.avg_pool2d(y, 2), F.adaptive_max_pool2d(y, 1), F.max_pool1d(x.unsqueeze(0), 3, 1, 1)


def norm_constant_rows(torch, x):
    F = torch.nn.functional
    c = x[2:3].expand(3, 4) * 1
    return F.layer_norm(c, (4,)), F.group_norm(c.reshape(1, 4, 3).contiguous(), 2), F.normalize(c * 0, dim=1), F.layer_norm(c, (4,), eps=0.0)


def batch_norm_single_value_raises(torch, x):
    F = torch.nn.functional
    return F.batch_norm(x[:1], torch.zeros(4), torch.ones(4), training=True)


def batch_norm_two_rows(torch, x):
    F = torch.nn.functional
    rm, rv = torch.zeros(4), torch.ones(4)
    y = F.batch_norm(x[2:], rm, rv, training=True, momentum=0.5)
    return y, rm, rv


def dropout_extremes(torch, x):
    F = torch.nn.functional
    return F.dropout(x, 0.0), F.dropout(x, 1.0), F.dropout(x, 0.5, training=False), F.dropout(x, 1.0, inplace=False).sum()


def softmax_dtype_arg(torch, x):
    F = torch.nn.functional
    return F.softmax(x, 1, dtype=torch.float64), F.log_softmax(x, 0, dtype=torch.float64), F.softmin(x, 1)


def kl_div_edges(torch, x):
    F = torch.nn.functional
    lp = F.log_softmax(x[2:], 1)
    t = torch.tensor([[0.0, 0.5, 0.5, 0.0], [0.25] * 4])
    return F.kl_div(lp, t, reduction="batchmean"), F.kl_div(lp, t.log(), reduction="sum", log_target=True), F.kl_div(lp, t, reduction="none")


CASES = [ce_all_ignored, ce_some_ignored_weights, ce_target_at_neg_inf, ce_label_smoothing,
         ce_label_smoothing_ignored_neg_inf,
         ce_probabilities, ce_bad_target_raises, nll_weights_zero_sum, bce_edges,
         losses_empty_batch, huber_smooth_l1_edges, embedding_padding_repeated,
         pooling_nan_windows, norm_constant_rows, batch_norm_single_value_raises,
         batch_norm_two_rows, dropout_extremes, softmax_dtype_arg, kl_div_edges]


@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
@pytest.mark.parametrize("grad", [False, True])
def test_nn_edges(fn, grad):
    x = LOGITS.copy()
    if fn is pooling_nan_windows:
        x[0, 1], x[3, 3] = nan, -inf
    check(fn, ("grad", x) if grad else x, atol=1e-6)
