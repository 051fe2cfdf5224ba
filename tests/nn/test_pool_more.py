"""lp_pool1d/2d, max_unpool1d/2d, local_response_norm, adaptive_max_pool*_with_indices and
their modules (LPPool1d/2d, MaxUnpool1d/2d, LocalResponseNorm): values and float64
gradients against torch, PyTorch's errors, gradcheck, compiled == eager, and an
encoder-decoder round trip (MaxPool2d with return_indices into MaxUnpool2d) compiled."""
import warnings

import numpy as np
import pytest

import llgrad
import llgrad.nn as nn
import llgrad.nn.functional as F

RNG = np.random.default_rng(13)


def _torch():
    return pytest.importorskip("torch")


def _both(fn, arrays, tol=1e-12):
    """fn(lib, *tensors) in llgrad and torch: outputs (a tensor or a tuple, the first one
    differentiated against a fixed cotangent) and the float inputs' gradients."""
    torch = _torch()
    out = []
    for lib in (llgrad, torch):
        ts = [lib.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
        r = fn(lib, *ts)
        r = r if isinstance(r, tuple) else (r,)
        cot = np.random.default_rng(1).standard_normal(tuple(r[0].shape))
        (r[0] * lib.tensor(cot)).sum().backward()
        out.append(([x.detach().numpy() for x in r],
                    [t.grad.numpy() for t in ts if t.requires_grad]))
    (a, ga), (b, gb) = out
    for x, y in zip(a + ga, b + gb):
        assert x.shape == y.shape and x.dtype == y.dtype
        np.testing.assert_allclose(x, y, rtol=tol, atol=tol)


X4 = RNG.standard_normal((2, 3, 7, 8))
X3 = RNG.standard_normal((2, 4, 9))


@pytest.mark.parametrize("p,args", [(2, (3,)), (1.5, ((2, 3), (1, 2))), (3, (2, 1, True)),
                                    (float("inf"), (3, 2)), (1, ((3, 2),))])
def test_lp_pool2d_matches_torch(p, args):
    x = np.abs(X4) + 0.1 if p in (1.5, 3) else X4       # (odd powers of negatives: NaN)
    _both(lambda L, t: L.nn.functional.lp_pool2d(t, p, *args), [x])
    _both(lambda L, t: L.nn.LPPool2d(p, *args)(t), [x])


@pytest.mark.parametrize("p,args", [(2, (3,)), (1.5, (2, 1)), (4, (3, 2, True)),
                                    (float("inf"), (2,))])
def test_lp_pool1d_matches_torch(p, args):
    x = np.abs(X3) + 0.1 if p == 1.5 else X3
    _both(lambda L, t: L.nn.functional.lp_pool1d(t, p, *args), [x])
    _both(lambda L, t: L.nn.LPPool1d(p, *args)(t), [x[0]])


def test_lp_pool_module_repr_matches_torch():
    torch = _torch()
    assert repr(nn.LPPool2d(2, 3, 2)) == repr(torch.nn.LPPool2d(2, 3, 2))
    assert repr(nn.LPPool1d(1.5, 3)) == repr(torch.nn.LPPool1d(1.5, 3))


@pytest.mark.parametrize("args,shape", [((2,), (2, 3, 6, 8)), ((3, 2, 1), (2, 2, 7, 7)),
                                        (((2, 3), (2, 2)), (1, 2, 6, 9)),
                                        ((2,), (3, 6, 6))])
def test_max_unpool2d_matches_torch(args, shape):
    x = RNG.standard_normal(shape)

    def fn(L, t):
        y, i = L.nn.functional.max_pool2d(t, *args, return_indices=True)
        return L.nn.functional.max_unpool2d(y * 2, i, *args,
                                            output_size=tuple(t.shape[-2:])), i
    _both(fn, [x])

    def module(L, t):
        pool = L.nn.MaxPool2d(*args, return_indices=True)
        y, i = pool(t)
        return L.nn.MaxUnpool2d(*args)(y, i)
    _both(module, [x])


@pytest.mark.parametrize("args,shape", [((2,), (2, 3, 8)), ((3, 2, 1), (2, 7)),
                                        ((2, 1), (1, 2, 6))])
def test_max_unpool1d_matches_torch(args, shape):
    x = RNG.standard_normal(shape)

    def fn(L, t):
        y, i = L.nn.functional.max_pool1d(t, *args, return_indices=True)
        return L.nn.MaxUnpool1d(*args)(y, i, output_size=list(t.shape[-1:]))
    _both(fn, [x])


def test_max_unpool_errors_and_repr_match_torch():
    torch = _torch()
    x = RNG.standard_normal((1, 2, 4, 4))

    def bad(i, value):          # one invalid index (ATen reports one of several by thread)
        i = i.clone()
        i[0, 1, 0, 1] = value
        return i
    cases = [
        lambda L, y, i: L.nn.functional.max_unpool2d(y, bad(i, 99), 2),
        lambda L, y, i: L.nn.functional.max_unpool2d(y, bad(i, -5), 2),
        lambda L, y, i: L.nn.functional.max_unpool2d(y, i[:, :1], 2),
        lambda L, y, i: L.nn.functional.max_unpool2d(y, i.int(), 2),
        lambda L, y, i: L.nn.functional.max_unpool2d(y[0, 0], i[0, 0], 2),
        lambda L, y, i: L.nn.functional.max_unpool2d(y, i, 2, output_size=[6, 6]),
        lambda L, y, i: L.nn.functional.max_unpool2d(y, i, 2, output_size=[6]),
        lambda L, y, i: L.nn.functional.max_unpool2d(y.long(), i, 2),
        lambda L, y, i: L.nn.functional.max_unpool2d(y, i, 2, 2, 3),
    ]
    for case in cases:
        msgs = []
        for lib in (llgrad, torch):
            y, i = lib.nn.functional.max_pool2d(lib.tensor(x), 2, return_indices=True)
            with pytest.raises(Exception) as info:
                case(lib, y, i)
            msgs.append((info.type.__name__, str(info.value)))
        assert msgs[0] == msgs[1]
    msgs = []
    for lib in (llgrad, torch):
        y, i = lib.nn.functional.max_pool1d(lib.tensor(x[0]), 2, return_indices=True)
        i[1, 1, 0] = 9
        with pytest.raises(RuntimeError) as info:
            lib.nn.functional.max_unpool1d(y, i, 2)
        msgs.append(str(info.value))
    assert msgs[0] == msgs[1] == ("Found an invalid max index: 9 (output volumes are of size "
                                  "4x1)")
    assert repr(nn.MaxUnpool2d(2, 1)) == repr(torch.nn.MaxUnpool2d(2, 1))
    assert repr(nn.MaxUnpool1d(3)) == repr(torch.nn.MaxUnpool1d(3))


@pytest.mark.parametrize("size,shape", [(2, (2, 5, 7)), (3, (2, 6, 4, 5)), (5, (1, 4, 3, 2, 2)),
                                        (1, (2, 3, 4))])
def test_local_response_norm_matches_torch(size, shape):
    x = RNG.standard_normal(shape)
    _both(lambda L, t: L.nn.functional.local_response_norm(t, size, alpha=0.3, beta=0.6, k=2.0),
          [x])
    _both(lambda L, t: L.nn.LocalResponseNorm(size)(t), [x])


def test_local_response_norm_errors_and_repr_match_torch():
    torch = _torch()
    for lib in (llgrad, torch):
        with pytest.raises(ValueError, match=r"Expected 3D or higher dimensionality {26}input "
                                             r"\(got 2 dimensions\)"):
            lib.nn.functional.local_response_norm(lib.zeros(3, 4), 2)
        assert tuple(lib.nn.functional.local_response_norm(lib.zeros(2, 3, 0), 2).shape) == \
            (2, 3, 0)
    assert repr(nn.LocalResponseNorm(3, k=2.0)) == repr(torch.nn.LocalResponseNorm(3, k=2.0))


@pytest.mark.parametrize("out", [3, (2, 3), (4, None)])
def test_adaptive_max_pool_with_indices_match_torch(out):
    _both(lambda L, t: L.nn.functional.adaptive_max_pool2d_with_indices(t, out), [X4])
    if not isinstance(out, tuple):
        _both(lambda L, t: L.nn.functional.adaptive_max_pool1d_with_indices(t, out), [X3])


def test_gradcheck():
    x = llgrad.tensor(np.abs(RNG.standard_normal((1, 2, 5, 6))) + 0.2, requires_grad=True)
    assert llgrad.autograd.gradcheck(lambda t: F.lp_pool2d(t, 1.5, 2, 1), (x,))
    assert llgrad.autograd.gradcheck(lambda t: F.local_response_norm(t, 3, alpha=0.5), (x,))
    y = llgrad.tensor(RNG.permutation(60).reshape(1, 3, 4, 5) / 7.0, requires_grad=True)

    def unpool(t):
        v, i = F.max_pool2d(t, 2, return_indices=True)
        return F.max_unpool2d(v, i, 2, output_size=(4, 5))
    assert llgrad.autograd.gradcheck(unpool, (y,))


def test_compiled_equals_eager():
    x = llgrad.tensor(RNG.standard_normal((2, 4, 8, 8)).astype(np.float32), requires_grad=True)
    conv = nn.Conv2d(4, 4, 3, padding=1)
    pool, unpool = nn.MaxPool2d(2, return_indices=True), nn.MaxUnpool2d(2)
    lrn, lp = nn.LocalResponseNorm(3), nn.LPPool2d(2, 2)

    def loss(x):
        y, i = pool(conv(x))
        back = unpool(lrn(y), i)                    # an encoder-decoder's round trip
        a, ai = F.adaptive_max_pool2d_with_indices(back, 3)
        return (back - x).pow(2).mean() + lp(x).mean() + a.sum() + \
            F.lp_pool1d(x.flatten(2).abs(), 3, 4).mean()

    results = []
    for fn in (loss, llgrad.compile(loss)):
        for _ in range(2):
            x.grad = conv.weight.grad = None
            with warnings.catch_warnings():
                warnings.simplefilter("error")      # no graph break
                value = fn(x)
            value.backward()
        results.append((value.item(), x.grad.numpy().copy(), conv.weight.grad.numpy().copy()))
    assert results[0][0] == pytest.approx(results[1][0], rel=1e-5)
    for a, b in zip(results[0][1:], results[1][1:]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
