"""F.max_pool1d, unfold/fold, the channel-wise and alpha dropouts, Softmax2d and the margin,
embedding and likelihood losses: values and float64 gradients against torch (when
installed), PyTorch's errors, the dropouts' mask structure and statistics, and compiled
calls equal to eager ones."""
import warnings

import numpy as np
import pytest

import llgrad
import llgrad.nn as nn
import llgrad.nn.functional as F

RNG = np.random.default_rng(11)


def _torch():
    return pytest.importorskip("torch")


def _both(fn, arrays, grads=True, frozen=()):
    """fn(lib, *tensors) in llgrad and torch on float64 copies: results and the grads of the
    float inputs (but those at positions `frozen`)."""
    torch = _torch()
    out = []
    for lib in (llgrad, torch):
        ts = [lib.tensor(a, requires_grad=grads and a.dtype.kind == "f" and k not in frozen)
              for k, a in enumerate(arrays)]
        r = fn(lib, *ts)
        g = None
        if grads:
            r.sum().backward() if r.dim() else r.backward()
            g = [None if t.grad is None else t.grad.numpy() for t in ts]
        out.append((r.detach().numpy(), g))
    (a, ga), (b, gb) = out
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    if grads:
        for x, y in zip(ga, gb):
            assert (x is None) == (y is None)
            if x is not None:
                np.testing.assert_allclose(x, y, rtol=1e-10, atol=1e-13)


X = RNG.standard_normal((4, 5))
X2 = RNG.standard_normal((4, 5))
SIGNS = np.where(RNG.random((4, 5)) < 0.5, -1.0, 1.0)
ROW_SIGNS = np.array([1.0, -1.0, -1.0, 1.0])
LABELS = np.array([0, 3, 4, 1])
MULTI = (RNG.random((4, 5)) < 0.4).astype(np.float64)
COUNTS = RNG.poisson(2.0, (4, 5)).astype(np.float64)
POS_VAR = RNG.random((4, 5)) + 0.1


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("case", [
    ("margin_ranking", lambda L, r, a, b, y: L.nn.functional.margin_ranking_loss(
        a, b, y, margin=0.3, reduction=r), [X, X2, SIGNS]),
    ("hinge_embedding", lambda L, r, a, y: L.nn.functional.hinge_embedding_loss(
        a, y, margin=0.7, reduction=r), [X, SIGNS]),
    ("cosine_embedding", lambda L, r, a, b, y: L.nn.functional.cosine_embedding_loss(
        a, b, y, margin=0.2, reduction=r), [X, X2, ROW_SIGNS]),
    ("soft_margin", lambda L, r, a, y: L.nn.functional.soft_margin_loss(a, y, reduction=r),
     [X, SIGNS]),
    ("multilabel_soft_margin", lambda L, r, a, y: L.nn.functional.multilabel_soft_margin_loss(
        a, y, reduction=r), [X, MULTI]),
    ("multi_margin_p1", lambda L, r, a, y: L.nn.functional.multi_margin_loss(
        a, y, reduction=r), [X, LABELS]),
    ("multi_margin_p2_weight", lambda L, r, a, y: L.nn.functional.multi_margin_loss(
        a, y, p=2, margin=0.5, weight=L.tensor([1.0, 2.0, 0.5, 1.5, 3.0], dtype=L.float64),
        reduction=r), [X, LABELS]),
    ("triplet", lambda L, r, a, b, c: L.nn.functional.triplet_margin_loss(
        a, b, c, margin=0.8, reduction=r), [X, X2, X * 0.5 + 0.1]),
    ("triplet_swap_p1", lambda L, r, a, b, c: L.nn.functional.triplet_margin_loss(
        a, b, c, p=1, swap=True, reduction=r), [X, X2, X * 0.5 + 0.1]),
    ("poisson_log", lambda L, r, a, y: L.nn.functional.poisson_nll_loss(a, y, reduction=r),
     [X, COUNTS]),
    ("poisson_full", lambda L, r, a, y: L.nn.functional.poisson_nll_loss(
        a, y, log_input=False, full=True, reduction=r), [POS_VAR, COUNTS]),
    ("gaussian", lambda L, r, a, y, v: L.nn.functional.gaussian_nll_loss(
        a, y, v, full=True, reduction=r), [X, X2, POS_VAR]),
    ("gaussian_var_per_row", lambda L, r, a, y, v: L.nn.functional.gaussian_nll_loss(
        a, y, v, reduction=r), [X, X2, POS_VAR[:, 0]]),
], ids=lambda c: c[0] if isinstance(c, tuple) else c)
def test_losses_match_torch(case, reduction):
    name, fn, arrays = case
    _both(lambda L, *t: fn(L, reduction, *t), arrays,
          frozen=(1,) if name == "soft_margin" else ())


def test_soft_margin_target_is_not_differentiable():
    with pytest.raises(RuntimeError, match="not differentiable with respect to argument 'target'"):
        F.soft_margin_loss(llgrad.zeros(2), llgrad.ones(2, requires_grad=True))


def test_loss_modules_match_torch():
    torch = _torch()
    pairs = [("MarginRankingLoss", dict(margin=0.1), [X, X2, SIGNS]),
             ("HingeEmbeddingLoss", dict(), [X, SIGNS]),
             ("CosineEmbeddingLoss", dict(margin=0.1), [X, X2, ROW_SIGNS]),
             ("SoftMarginLoss", dict(reduction="sum"), [X, SIGNS]),
             ("MultiLabelSoftMarginLoss", dict(), [X, MULTI]),
             ("MultiMarginLoss", dict(p=2), [X, LABELS]),
             ("TripletMarginLoss", dict(swap=True), [X, X2, X + 1]),
             ("TripletMarginWithDistanceLoss", dict(margin=0.5), [X, X2, X + 1]),
             ("PoissonNLLLoss", dict(full=True), [X, COUNTS]),
             ("GaussianNLLLoss", dict(eps=1e-3), [X, X2, POS_VAR])]
    for name, kw, arrays in pairs:
        _both(lambda L, *t: getattr(L.nn, name)(**kw)(*t), arrays,
              frozen=(1,) if name == "SoftMarginLoss" else ())
        assert repr(getattr(nn, name)(**kw)) == repr(getattr(torch.nn, name)(**kw))


@pytest.mark.parametrize("call,match", [
    (lambda: F.multi_margin_loss(llgrad.zeros(2, 3), llgrad.tensor([0, 1]), p=3),
     "only p == 1 and p == 2 supported"),
    (lambda: F.triplet_margin_loss(llgrad.zeros(2, 3), llgrad.zeros(2, 3), llgrad.zeros(3),
                                   margin=1.0), "same number of dimensions"),
    (lambda: F.triplet_margin_loss(llgrad.zeros(3), llgrad.zeros(3), llgrad.zeros(3),
                                   margin=0), "margin must be greater than 0"),
    (lambda: F.gaussian_nll_loss(llgrad.zeros(2, 3), llgrad.zeros(2, 3), llgrad.ones(3, 2)),
     "var is of incorrect size"),
    (lambda: F.gaussian_nll_loss(llgrad.zeros(2), llgrad.zeros(2), -1.0),
     "var has negative entry"),
    (lambda: F.margin_ranking_loss(llgrad.zeros(2), llgrad.zeros(2), llgrad.zeros(1, 2)),
     "All input tensors should have same dimension"),
    (lambda: F.cosine_embedding_loss(llgrad.zeros(2, 3), llgrad.zeros(2, 3), llgrad.zeros(2, 1)),
     "0D or 1D target tensor expected"),
])
def test_loss_errors(call, match):
    with pytest.raises((ValueError, RuntimeError), match=match):
        call()


@pytest.mark.parametrize("args", [(3,), (3, 2, 1, 2, True), (2, 1), (4, 3, 2, 1, True),
                                  ((2,), (2,), (1,))])
def test_max_pool1d_matches_torch(args):
    torch = _torch()
    x = RNG.standard_normal((2, 3, 11))
    a = torch.nn.functional.max_pool1d(torch.tensor(x, requires_grad=True), *args,
                                       return_indices=True)
    b = F.max_pool1d(llgrad.tensor(x, requires_grad=True), *args, return_indices=True)
    np.testing.assert_array_equal(a[0].detach().numpy(), b[0].detach().numpy())
    np.testing.assert_array_equal(a[1].numpy(), b[1].numpy())
    _both(lambda L, t: L.nn.functional.max_pool1d(t, *args), [x])
    _both(lambda L, t: L.nn.MaxPool1d(*args[:1])(t), [x[0]])
    assert repr(nn.MaxPool1d(3, 2)) == repr(torch.nn.MaxPool1d(3, 2))


@pytest.mark.parametrize("call,match", [
    (lambda: F.max_pool1d(llgrad.zeros(2, 3, 4, 5), 2), "Expected 2D or 3D"),
    (lambda: F.max_pool1d(llgrad.zeros(2, 3, 10), 0), "kernel_size must be greater than zero"),
    (lambda: F.max_pool1d(llgrad.zeros(2, 3, 10), 3, stride=0), "stride must be greater"),
    (lambda: F.max_pool1d(llgrad.zeros(2, 3, 10), 3, padding=2), "at most half of kernel"),
    (lambda: F.max_pool1d(llgrad.zeros(2, 3, 1), 3), "Invalid computed output size: 0"),
    (lambda: F.unfold(llgrad.zeros(1, 2, 3, 4, 5), 2), "Expected 3D or 4D .batch mode."),
    (lambda: F.fold(llgrad.zeros(2, 7, 12), (5, 6), (2, 3), padding=1, stride=2),
     "divisible by the product of kernel_size"),
    (lambda: F.fold(llgrad.zeros(2, 18, 11), (5, 6), (2, 3), padding=1, stride=2),
     "calculated number of sliding blocks 3 . 3 = 9"),
])
def test_pool_and_fold_errors(call, match):
    with pytest.raises(RuntimeError, match=match):
        call()


@pytest.mark.parametrize("args", [((2, 3),), ((2, 3), 1, 1, 2), ((3, 2), (2, 1), (1, 0), (1, 2))])
def test_unfold_and_fold_match_torch(args):
    x = RNG.standard_normal((2, 3, 5, 6))
    _both(lambda L, t: L.nn.functional.unfold(t, *args) * 1.5, [x])
    _both(lambda L, t: L.nn.functional.unfold(t, *args), [x[0]])
    torch = _torch()
    blocks = torch.nn.functional.unfold(torch.tensor(x), *args).numpy()
    _both(lambda L, t: L.nn.functional.fold(t, (5, 6), *args), [blocks])
    _both(lambda L, t: L.nn.Fold((5, 6), *args)(t), [blocks[0]])


@pytest.mark.parametrize("name,shape", [("dropout1d", (6, 8, 5)), ("dropout2d", (6, 8, 5, 4)),
                                        ("dropout3d", (6, 8, 3, 4, 2)),
                                        ("feature_alpha_dropout", (6, 8, 5, 4))])
def test_channel_dropouts_drop_whole_channels(name, shape):
    llgrad.manual_seed(0)
    x = llgrad.ones(*shape)
    y = getattr(F, name)(x, p=0.4, training=True).numpy()
    planes = y.reshape(shape[0] * shape[1], -1)
    assert all(len(np.unique(row)) == 1 for row in planes)      # one value per channel
    kept = planes[:, 0]
    assert 0.2 < np.mean(kept == planes[:, 0].max()) < 0.9
    assert np.array_equal(getattr(F, name)(x, p=0.4, training=False).numpy(), x.numpy())
    assert not getattr(F, name)(x, p=1.0, training=True).numpy().any()


def test_dropout_warnings_and_unbatched():
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        F.dropout2d(llgrad.ones(3, 4, 5))
    assert any("interpreted as shape (N, C, L)" in str(m.message) for m in w)
    with pytest.raises(RuntimeError, match="dropout1d: Expected 2D or 3D input"):
        F.dropout1d(llgrad.ones(2, 3, 4, 5))
    y = F.dropout1d(llgrad.ones(8, 50), 0.5).numpy()
    assert y.shape == (8, 50) and all(len(np.unique(r)) == 1 for r in y)
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1"):
        nn.Dropout2d(1.5)


def test_alpha_dropout_keeps_mean_and_variance():
    llgrad.manual_seed(1)
    x = llgrad.randn(400_000)
    y = F.alpha_dropout(x, 0.3, training=True).numpy()
    assert abs(y.mean()) < 0.01 and abs(y.std() - 1) < 0.01
    assert np.array_equal(nn.AlphaDropout(0.3).eval()(x).numpy(), x.numpy())


def test_softmax2d():
    x = RNG.standard_normal((2, 3, 4, 5))
    _both(lambda L, t: L.nn.Softmax2d()(t) * L.tensor(x), [x])
    with pytest.raises(ValueError, match="expected input to be 3D or 4D"):
        nn.Softmax2d()(llgrad.zeros(3, 4))


def test_compiled_equals_eager():
    x = llgrad.tensor(RNG.standard_normal((2, 3, 6, 6)).astype(np.float32))
    w = llgrad.tensor(RNG.standard_normal((5, 27)).astype(np.float32), requires_grad=True)
    y = llgrad.tensor(RNG.standard_normal((2, 5, 16)).astype(np.float32))

    def loss(x, w, y):
        cols = F.unfold(F.dropout2d(x, 0.3), 3, padding=0)              # (2, 27, 16)
        out = w @ cols                                                  # (2, 5, 16)
        back = F.fold(out.repeat(1, 27 // 5 + 1, 1)[:, :27], (6, 6), 3)
        pooled = F.max_pool1d(out, 2)
        return F.soft_margin_loss(pooled, y[..., :8].sign()) + back.pow(2).mean() + \
            F.triplet_margin_loss(out[0], out[1], y[0], margin=0.5)

    results = []
    for fn in (loss, llgrad.compile(loss)):
        llgrad.manual_seed(7)
        for _ in range(3):
            w.grad = None
            value = fn(x, w, y)
            value.backward()
        results.append((value.item(), w.grad.numpy().copy()))
    assert results[0][0] == pytest.approx(results[1][0], rel=1e-5)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-4, atol=1e-5)
