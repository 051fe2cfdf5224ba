"""F.multilabel_margin_loss / nn.MultiLabelMarginLoss, F.pdist / torch.pdist and torch.kl_div
(the function, ATen's reduction numbers): values and float64 gradients against torch,
PyTorch's errors, gradcheck, and compiled == eager."""
import warnings

import numpy as np
import pytest

import llgrad
import llgrad.nn as nn
import llgrad.nn.functional as F

RNG = np.random.default_rng(17)


def _torch():
    return pytest.importorskip("torch")


def _both(fn, arrays, tol=1e-12, frozen=()):
    """fn(lib, *tensors) and the gradients of the float inputs (but those at `frozen`) from a
    fixed cotangent, in llgrad and torch."""
    torch = _torch()
    out = []
    for lib in (llgrad, torch):
        ts = [lib.tensor(a, requires_grad=a.dtype.kind == "f" and k not in frozen)
              for k, a in enumerate(arrays)]
        r = fn(lib, *ts)
        cot = np.random.default_rng(1).standard_normal(tuple(r.shape))
        (r * lib.tensor(cot)).sum().backward() if r.numel() else None
        out.append((r.detach().numpy(), [t.grad for t in ts if t.requires_grad]))
    (a, ga), (b, gb) = out
    assert a.shape == b.shape
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)
    for x, y in zip(ga, gb):
        assert (x is None) == (y is None)
        if x is not None:
            np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=tol, atol=tol)


X = RNG.standard_normal((4, 5))
TARGETS = np.array([[3, 0, -1, 1, 2],          # targets 3, 0
                    [1, 2, 3, 4, -1],          # four targets
                    [-1, 2, 3, 0, 0],          # none
                    [4, 4, 1, -1, 0]])         # a repeated target


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_multilabel_margin_loss_matches_torch(reduction):
    _both(lambda L, x, y: L.nn.functional.multilabel_margin_loss(x, y, reduction=reduction),
          [X, TARGETS])
    _both(lambda L, x, y: L.nn.MultiLabelMarginLoss(reduction=reduction)(x, y),
          [X[1], TARGETS[1]])
    _both(lambda L, x, y: L.nn.functional.multilabel_margin_loss(x, y, reduction=reduction),
          [X[0, :1].reshape(()), np.array(0)])
    # ties at the hinge (z == 0): no gradient, as the kernel's z > 0
    _both(lambda L, x, y: L.nn.functional.multilabel_margin_loss(x, y, reduction=reduction),
          [np.array([[1.0, 0.0, 0.5]]), np.array([[0, -1, 0]])])


def test_multilabel_margin_loss_errors_match_torch():
    torch = _torch()
    cases = [
        lambda L: L.nn.functional.multilabel_margin_loss(L.randn(2, 3), L.tensor([[0, 1],
                                                                                 [2, -1]])),
        lambda L: L.nn.functional.multilabel_margin_loss(L.randn(2, 3), L.tensor([[0, 1, 3],
                                                                                 [2, -1, 0]])),
        lambda L: L.nn.functional.multilabel_margin_loss(L.randn(2, 3), L.tensor([[0, 1, -2],
                                                                                 [2, -1, 0]])),
        lambda L: L.nn.functional.multilabel_margin_loss(
            L.randn(2, 3), L.tensor([[0, 1, 2], [2, -1, 0]], dtype=L.int32)),
        lambda L: L.nn.functional.multilabel_margin_loss(L.randn(2, 3, 4), L.zeros(2, 3, 4,
                                                                                   dtype=L.long)),
        lambda L: L.nn.functional.multilabel_margin_loss(L.randn(2, 0), L.zeros(2, 0,
                                                                                dtype=L.long)),
        lambda L: L.nn.functional.multilabel_margin_loss(L.randn(2, 3), L.zeros(2, 3,
                                                                                dtype=L.long),
                                                         reduction="batchmean"),
    ]
    for case in cases:
        msgs = []
        for lib in (llgrad, torch):
            with pytest.raises(Exception) as info:
                case(lib)
            msgs.append((info.type.__name__, str(info.value)))
        assert msgs[0] == msgs[1]
    with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated"):
        loss = F.multilabel_margin_loss(llgrad.tensor(X), llgrad.tensor(TARGETS), reduce=False)
    assert tuple(loss.shape) == (4,)
    assert repr(nn.MultiLabelMarginLoss()) == repr(torch.nn.MultiLabelMarginLoss())


@pytest.mark.parametrize("p", [2, 1, 0, 1.5, 3, float("inf")])
def test_pdist_matches_torch(p):
    x = RNG.standard_normal((6, 4))
    _both(lambda L, t: L.nn.functional.pdist(t, p), [x], tol=1e-11)
    _both(lambda L, t: L.pdist(t, p), [x[:3]], tol=1e-11)


def test_pdist_repeated_rows_and_edge_shapes_match_torch():
    """Equal rows: a zero distance with a zero gradient (ATen's pdist backward)."""
    x = RNG.standard_normal((4, 3))
    x[2] = x[0]
    for p in (2, 1, 3):
        _both(lambda L, t: L.pdist(t, p), [x], tol=1e-11)
    for shape in ((1, 3), (0, 3), (3, 0)):
        _both(lambda L, t: L.pdist(t), [np.zeros(shape)])


def test_pdist_errors_match_torch():
    torch = _torch()
    cases = [lambda L: L.pdist(L.randn(3, 4, 2)), lambda L: L.pdist(L.tensor([[1, 2], [3, 4]])),
             lambda L: L.pdist(L.randn(3, 4), -1)]
    for case in cases:
        msgs = []
        for lib in (llgrad, torch):
            with pytest.raises(RuntimeError) as info:
                case(lib)
            msgs.append(str(info.value))
        assert msgs[0] == msgs[1]


@pytest.mark.parametrize("reduction", [0, 1, 2])
@pytest.mark.parametrize("log_target", [False, True])
def test_torch_kl_div_matches_torch(reduction, log_target):
    target = RNG.random((3, 4)) + 0.05
    if log_target:
        target = np.log(target)
    _both(lambda L, x, t: L.kl_div(x, t, reduction, log_target=log_target),
          [RNG.standard_normal((3, 4)), target])
    _both(lambda L, x, t: L.kl_div(x, t), [RNG.standard_normal((3, 4)), np.abs(target)])
    # a zero target: a zero term (its own gradient is F.kl_div's, finite where PyTorch's is
    # NaN, so only the input's is compared)
    target[0, 0] = 0.0
    _both(lambda L, x, t: L.kl_div(x, t, reduction), [RNG.standard_normal((3, 4)),
                                                       np.abs(target)], frozen=(1,))


def test_gradcheck():
    x = llgrad.tensor(X, requires_grad=True)
    assert llgrad.autograd.gradcheck(
        lambda t: F.multilabel_margin_loss(t, llgrad.tensor(TARGETS), reduction="none"), (x,))
    assert llgrad.autograd.gradcheck(lambda t: F.pdist(t), (x,))
    assert llgrad.autograd.gradcheck(lambda t: F.pdist(t, 1.5), (x,))


def test_compiled_equals_eager():
    x = llgrad.tensor(X.astype(np.float32), requires_grad=True)
    y = llgrad.tensor(TARGETS)
    target = llgrad.tensor(RNG.random((4, 5)).astype(np.float32))

    def loss(x):
        return F.multilabel_margin_loss(x, y) + F.pdist(x).mean() + \
            llgrad.pdist(x, 1).sum() * 0.1 + llgrad.kl_div(x, target, 1)

    results = []
    for fn in (loss, llgrad.compile(loss)):
        for _ in range(2):
            x.grad = None
            with warnings.catch_warnings():
                warnings.simplefilter("error")          # no graph break
                value = fn(x)
            value.backward()
        results.append((value.item(), x.grad.numpy().copy()))
    assert results[0][0] == pytest.approx(results[1][0], rel=1e-5)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-4, atol=1e-6)
