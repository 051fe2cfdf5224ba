"""Sweep 8: every loss module over the product of its options (reduction none / mean / sum,
class weights, ignore_index, label_smoothing, log_target, full, swap, p, margins, ...)
against torch: outputs, grad_fn names, gradients of the inputs, errors
(tests/nn/oracle_sweep8.py)."""
import itertools
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402
from oracle_sweep8 import check  # noqa: E402

REDUCTIONS = ("none", "mean", "sum")
W5 = np.array([1.0, 2.0, 0.5, 0.0, 1.5], np.float32)
W4 = np.array([1.0, 2.0, 0.5, 0.3], np.float32)


def _inputs(seed):
    r = np.random.default_rng(seed)
    return dict(
        f=lambda *s: r.standard_normal(s).astype(np.float32),
        u=lambda *s: r.uniform(0.05, 0.95, s).astype(np.float32),
        sign=lambda *s: np.where(r.uniform(size=s) > 0.5, 1.0, -1.0).astype(np.float32),
        ints=lambda hi, *s: r.integers(0, hi, s).astype(np.int64))


def _loss(name, kw):
    def build(lib):
        return getattr(lib.nn, name)(**{k: lib.tensor(v) if isinstance(v, np.ndarray) else v
                                        for k, v in kw.items()})
    return build


def _ce_cases():
    out = []
    for red, w, ig, ls in itertools.product(REDUCTIONS, (None, W5), (-100, 1, 0), (0.0, 0.1, 1.0)):
        kw = dict(reduction=red, ignore_index=ig, label_smoothing=ls)
        if w is not None:
            kw["weight"] = w
        out.append(kw)
    return out


@pytest.mark.parametrize("kw", _ce_cases(), ids=str)
def test_cross_entropy_options(kw):
    g = _inputs(0)
    build = _loss("CrossEntropyLoss", kw)
    check(build, [g["f"](4, 5), np.array([0, 1, 1, 3])])
    check(build, [g["f"](2, 5, 3), np.array([[0, 1, 4], [1, 1, 2]])])
    check(build, [g["f"](5), np.array(1)])
    check(build, [g["f"](2, 5), np.array([1, 1])])        # (every target ignored with 1)
    probs = dict(kw)
    probs.pop("ignore_index")
    check(_loss("CrossEntropyLoss", probs), [g["f"](3, 5), g["u"](3, 5)])


@pytest.mark.parametrize("red,w,ig", list(itertools.product(REDUCTIONS, (None, W5), (-100, 1))),
                         ids=str)
def test_nll_options(red, w, ig):
    g = _inputs(1)
    kw = dict(reduction=red, ignore_index=ig)
    if w is not None:
        kw["weight"] = w
    build = _loss("NLLLoss", kw)
    check(build, [np.log(g["u"](4, 5)), np.array([0, 1, 1, 3])])
    check(build, [np.log(g["u"](2, 5, 2, 2)), g["ints"](5, 2, 2, 2)])
    check(build, [np.log(g["u"](5)), np.array(2)])


@pytest.mark.parametrize("red", REDUCTIONS)
def test_pointwise_losses(red):
    g = _inputs(2)
    f, u, sign = g["f"], g["u"], g["sign"]
    check(_loss("BCELoss", dict(reduction=red)), [u(3, 4), u(3, 4)])
    check(_loss("BCELoss", dict(reduction=red, weight=np.array([1, 2, 0.5, 0], np.float32))),
          [u(3, 4), u(3, 4)])
    check(_loss("BCEWithLogitsLoss", dict(reduction=red, pos_weight=np.array(
        [1, 2, 0.5, 3], np.float32))), [f(3, 4), u(3, 4)])
    check(_loss("BCEWithLogitsLoss", dict(reduction=red, weight=np.array(
        [1, 2, 0.5, 0], np.float32))), [f(3, 4), u(3, 4)])
    for name in ("L1Loss", "MSELoss", "SmoothL1Loss", "HuberLoss", "MultiLabelSoftMarginLoss"):
        check(_loss(name, dict(reduction=red)), [f(3, 4), (u(3, 4) > 0.5).astype(np.float32)])
    # (a target that requires grad: torch's error, without llgrad's note of the line)
    check(_loss("SoftMarginLoss", dict(reduction=red)), [f(3, 4), sign(3, 4)])
    check(_loss("SoftMarginLoss", dict(reduction=red)), [f(3, 4), sign(3, 4)], grad=False)
    check(_loss("SmoothL1Loss", dict(reduction=red, beta=0.5)), [f(3, 4), f(3, 4)])
    check(_loss("HuberLoss", dict(reduction=red, delta=0.3)), [f(3, 4), f(3, 4)])
    check(_loss("MultiLabelSoftMarginLoss", dict(reduction=red, weight=W4)),
          [f(3, 4), (u(3, 4) > 0.5).astype(np.float32)])


@pytest.mark.parametrize("red", REDUCTIONS + ("batchmean",))
@pytest.mark.parametrize("log_target", (False, True))
def test_kl_div(red, log_target):
    u = _inputs(3)["u"]
    check(_loss("KLDivLoss", dict(reduction=red, log_target=log_target)),
          [np.log(u(3, 5)), np.log(u(3, 5)) if log_target else u(3, 5)])


@pytest.mark.parametrize("red", REDUCTIONS)
@pytest.mark.parametrize("full", (False, True))
def test_likelihood_losses(red, full):
    g = _inputs(4)
    f, u = g["f"], g["u"]
    for log_input in (True, False):
        check(_loss("PoissonNLLLoss", dict(reduction=red, log_input=log_input, full=full)),
              [f(3, 4) if log_input else u(3, 4), u(3, 4) * 4])
    check(_loss("GaussianNLLLoss", dict(reduction=red, full=full)), [f(3, 4), f(3, 4), u(3, 4)])
    check(_loss("GaussianNLLLoss", dict(reduction=red, full=full)), [f(3, 4), f(3, 4), u(3, 1)])


@pytest.mark.parametrize("red", REDUCTIONS)
def test_margin_losses(red):
    g = _inputs(5)
    f, sign, ints = g["f"], g["sign"], g["ints"]
    check(_loss("MarginRankingLoss", dict(reduction=red, margin=0.3)), [f(5), f(5), sign(5)])
    check(_loss("HingeEmbeddingLoss", dict(reduction=red, margin=0.7)), [f(3, 4), sign(3, 4)])
    check(_loss("CosineEmbeddingLoss", dict(reduction=red, margin=0.2)),
          [f(3, 4), f(3, 4), sign(3)])
    for p in (1, 2):
        check(_loss("MultiMarginLoss", dict(reduction=red, p=p, margin=0.6)), [f(3, 5), ints(5, 3)])
        check(_loss("MultiMarginLoss", dict(reduction=red, p=p, weight=W5)), [f(3, 5), ints(5, 3)])
    check(_loss("MultiLabelMarginLoss", dict(reduction=red)),
          [f(2, 4), np.array([[3, 0, -1, 1], [0, 1, 2, 3]])])
    for swap in (False, True):
        for p in (1.0, 2.0, 3.0):
            check(_loss("TripletMarginLoss", dict(reduction=red, swap=swap, p=p, margin=0.5)),
                  [f(3, 4), f(3, 4), f(3, 4)])
        check(_loss("TripletMarginWithDistanceLoss", dict(reduction=red, swap=swap)),
              [f(3, 4), f(3, 4), f(3, 4)])


@pytest.mark.parametrize("red", REDUCTIONS)
@pytest.mark.parametrize("zero_infinity", (False, True))
def test_ctc(red, zero_infinity):
    u = _inputs(6)["u"]
    p = u(6, 2, 5)
    build = _loss("CTCLoss", dict(reduction=red, zero_infinity=zero_infinity))
    targets = np.array([[1, 2, 2], [3, 1, 0]])
    check(build, [np.log(p / p.sum(-1, keepdims=True)), targets, np.array([6, 5]),
                  np.array([3, 2])])
    # the first sample cannot align (2 steps for 3 labels): an infinite loss, NaN gradients
    check(build, [np.log(np.full((2, 2, 5), 0.2, np.float32)), targets, np.array([2, 2]),
                  np.array([3, 2])])


@pytest.mark.parametrize("zero_infinity", (False, True))
def test_ctc_impossible_alignment_gradient(zero_infinity):
    """PyTorch's gradient of an impossible alignment is NaN at the sample's steps before its
    input length (whatever the incoming gradient), zero after; with zero_infinity, zero."""
    grads = []
    for lib in (torch, llgrad):
        x = lib.log(lib.full((4, 2, 5), 0.2)).requires_grad_()
        loss = lib.nn.functional.ctc_loss(x, lib.tensor([[1, 2, 2], [3, 1, 0]]),
                                          lib.tensor([2, 3]), lib.tensor([3, 2]),
                                          reduction="none", zero_infinity=zero_infinity)
        (loss * lib.tensor([0.0, 1.0])).sum().backward()
        grads.append(x.grad.numpy())
    assert np.isnan(grads[1][:2, 0]).all() != zero_infinity
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_ctc_impossible_alignment_gradient_compiled():
    def step(x):
        loss = llgrad.nn.functional.ctc_loss(x, llgrad.tensor([[1, 2, 2], [3, 1, 0]]),
                                             llgrad.tensor([2, 3]), llgrad.tensor([3, 2]))
        loss.backward()
        return loss

    compiled = llgrad.compile(step)
    for _ in range(2):
        x = llgrad.log(llgrad.full((4, 2, 5), 0.2)).requires_grad_()
        assert compiled(x).item() == float("inf")
        assert np.isnan(x.grad.numpy()[:2, 0]).all()
        assert not np.isnan(x.grad.numpy()[:, 1]).any()


_F = "binary_cross_entropy_with_logits cross_entropy l1_loss mse_loss nll_loss".split()


@pytest.mark.parametrize("name", _F)
@pytest.mark.parametrize("legacy", [dict(size_average=False), dict(reduce=False),
                                    dict(size_average=True, reduce=True)], ids=str)
def test_legacy_reduction_arguments(name, legacy):
    """size_average / reduce pick the reduction as PyTorch's _Reduction.legacy_get_string
    (nll_loss, cross_entropy, mse_loss and binary_cross_entropy_with_logits ignored them)."""
    g = _inputs(7)
    x = g["f"](3, 4)
    target = {"cross_entropy": np.array([0, 3, 1]), "nll_loss": np.array([0, 3, 1]),
              "binary_cross_entropy_with_logits": g["u"](3, 4)}.get(name, g["f"](3, 4))

    def fwd(m, xs, lib):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            out = getattr(lib.nn.functional, name)(*xs, **legacy)
        return out, [str(w.message) for w in seen]
    check(lambda lib: lib.nn.Identity(), [x, target], fwd)


@pytest.mark.parametrize("targets,input_lengths,target_lengths", [
    ([[1, 2], [1, 1]], [4, 3], [2, 2]), ([[1, 2], [1, 1]], [-1, 3], [2, 2]),
    ([[1, 2], [1, 1]], [3, 3], [3, 2]), ([[1, 2], [1, 1]], [3, 3], [-1, 2]),
    ([1, 2, 1], [3, 3], [2, 2]), ([1, 2, 1, 1, 1], [3, 3], [2, 2]), ([1, 2, 1], [3, 3], [-1, 2]),
    ([[1, 2], [1, 1], [1, 1]], [3, 3], [2, 2]), ([1, 2, 1, 1], [3, 3], [2, 2]),
    ([[1, 2], [1, 1]], [3, 3, 3], [2, 2])], ids=str)
def test_ctc_length_errors(targets, input_lengths, target_lengths):
    """ctc_loss_allocate_outputs' checks (the input lengths past the input read past its
    end, a too short padded target read the next row)."""
    log_probs = np.log(np.full((3, 2, 4), 0.25, np.float32))
    for as_tensors in (False, True):
        def fwd(m, xs, lib, as_tensors=as_tensors):
            lengths = [lib.tensor(v) if as_tensors else v for v in (input_lengths, target_lengths)]
            return lib.nn.functional.ctc_loss(xs[0], lib.tensor(targets), *lengths)
        check(lambda lib: lib.nn.Identity(), [log_probs], fwd)
    for blank in (4, -1):
        check(lambda lib: lib.nn.Identity(), [log_probs],
              lambda m, xs, lib: lib.nn.functional.ctc_loss(
                  xs[0], lib.tensor([[1, 2], [1, 1]]), [3, 3], [2, 2], blank=blank))
