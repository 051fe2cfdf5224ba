"""torch names llgrad lacked (fifth sweep), against torch: frexp, nextafter, i0, igamma /
igammac (and special.i0 / gammainc / gammaincc), histogram / histogramdd, gradient,
poisson / binomial (by their statistics), frobenius_norm / nuclear_norm."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402
from sweep5_harness import same  # noqa: E402

R = np.random.default_rng(2)
V = np.array([0.3, 5.0, -3.5, 1e-30, 0.0, 12.0, -0.75], np.float32)
SPECIAL = np.array([np.inf, -np.inf, np.nan, 0.0, 1.0, 1e-40], np.float32)


@pytest.mark.parametrize("fn", [
    lambda t, x: t.frexp(x), lambda t, x: x.frexp(), lambda t, x: t.frexp(x.double()),
    lambda t, x: t.frexp(x.half()), lambda t, x: t.frexp(x.long()),
    lambda t, x: t.nextafter(x, t.tensor(2.0)), lambda t, x: x.nextafter(x.flip(0)),
    lambda t, x: t.nextafter(x, x.double().detach()), lambda t, x: t.nextafter(x.long(), x.long()),
    lambda t, x: x.detach().clone().nextafter_(t.zeros(7)),
    lambda t, x: t.i0(x), lambda t, x: x.i0(), lambda t, x: t.i0(x.long()),
    lambda t, x: t.special.i0(x.double()), lambda t, x: t.i0(x.detach().clone().i0_()),
])
def test_unary(fn):
    same(fn, V, rtol=2e-6, atol=1e-30)


@pytest.mark.parametrize("fn", [lambda t, x: t.frexp(x), lambda t, x: t.i0(x),
                                lambda t, x: t.nextafter(x, t.zeros(6))])
def test_unary_special_values(fn):
    same(fn, SPECIAL, grad=False)


A = np.array([0.5, 1.0, 2.0, 3.0, 100.0, 7.5], np.float32)
XS = np.array([0.1, 0.5, 30.0, 2.0, 120.0, 9.0], np.float32)


@pytest.mark.parametrize("fn", [
    lambda t, a, x: t.igamma(a.detach(), x), lambda t, a, x: t.igammac(a.detach(), x),
    lambda t, a, x: a.detach().igamma(x), lambda t, a, x: a.detach().igammac(x),
    lambda t, a, x: t.special.gammainc(a.detach().double(), x.double()),
    lambda t, a, x: t.special.gammaincc(a.detach(), x),
    lambda t, a, x: a.detach().clone().igamma_(x.detach()),
    lambda t, a, x: t.igamma(a.long(), x.long()),
    lambda t, a, x: t.igamma(a.detach(), x.double()),
])
def test_igamma(fn):
    same(fn, A, XS, rtol=1e-5, atol=1e-7)


def test_igamma_edges_and_input_derivative():
    a = [0.0, 0.0, -1.0, 1.0, 2.0, np.inf, 1.0, 3.0]
    x = [0.0, 2.0, 1.0, 0.0, -1.0, 2.0, np.inf, np.nan]
    for fn in ("igamma", "igammac"):
        want = getattr(torch, fn)(torch.tensor(a, dtype=torch.float64),
                                  torch.tensor(x, dtype=torch.float64))
        got = getattr(llgrad, fn)(llgrad.tensor(a, dtype=llgrad.float64),
                                  llgrad.tensor(x, dtype=llgrad.float64))
        np.testing.assert_allclose(got.numpy(), want.numpy(), equal_nan=True)
    a = llgrad.tensor([1.0, 2.0], requires_grad=True)
    out = llgrad.igamma(a, llgrad.tensor([0.5, 3.0]))
    assert type(out.grad_fn).__name__ == "IgammaBackward0"
    with pytest.raises(NotImplementedError, match="the derivative for 'igamma: input' is not "
                                                  "implemented."):
        out.sum().backward()


H = np.array([1.0, 2, 1, 4, 2.5, 0.3, 3.3], np.float32)


@pytest.mark.parametrize("fn", [
    lambda t, x: t.histogram(x, 4), lambda t, x: x.histogram(3, range=(0.0, 2.0)),
    lambda t, x: t.histogram(x, t.tensor([0.0, 1.5, 3])),
    lambda t, x: t.histogram(x, 2, weight=t.ones(7) * 2, density=True),
    lambda t, x: t.histogram(x, 5, density=True),
    lambda t, x: t.histogram(x[:2] * 0 + 3, 2), lambda t, x: t.histogram(x[:0], 2),
    lambda t, x: t.histogram(x.long(), 2), lambda t, x: t.histogram(x, 0),
    lambda t, x: t.histogram(x, 2, range=(3.0, 1.0)),
    lambda t, x: t.histogram(x, t.tensor([0.0, 1], dtype=t.float64)),
    lambda t, x: t.histogram(x, 2, weight=t.ones(3)),
    lambda t, x: t.histogram(x, t.tensor([2.0, 1])),
    lambda t, x: t.histogram(t.tensor([1.0, float("nan")]), 2),
    lambda t, x: t.histogram(t.tensor([1.0, float("inf")]), 2),
    lambda t, x: t.histogram(x.double().view(7, 1), 3),
    lambda t, x: t.histogramdd(x[:6].view(3, 2), bins=[3, 3], weight=t.tensor([1.0, 2, 4])),
    lambda t, x: t.histogramdd(x[:6].view(3, 2), bins=2, range=[0.0, 1.0, 0.0, 1.0]),
    lambda t, x: t.histogramdd(x[:6].view(3, 2), bins=[t.tensor([0.0, 1, 2]),
                                                       t.tensor([0.0, 2])], density=True),
    lambda t, x: t.histogramdd(x[:6].view(2, 3), bins=[2, 1, 3]),
])
def test_histograms(fn):
    same(fn, H, grad=False, rtol=1e-6)


G = np.array([[1.0, 2, 4, 8], [10, 20, 40, 80], [3, 5, 7, 9]], np.float32)


@pytest.mark.parametrize("fn", [
    lambda t, x: t.gradient(x), lambda t, x: t.gradient(x, dim=1, edge_order=2),
    lambda t, x: t.gradient(x, spacing=2.0), lambda t, x: t.gradient(x, spacing=[2.0, 3.0]),
    lambda t, x: t.gradient(x, spacing=(t.tensor([0.0, 1, 3]), t.tensor([0.0, 1, 1.5, 3.5]))),
    lambda t, x: t.gradient(x, spacing=(t.tensor([0.0, 1, 3]), t.tensor([0.0, 1, 1.5, 3.5])),
                            edge_order=2),
    lambda t, x: t.gradient(x, spacing=[t.tensor([0.0, 1, 1.5, 3.5])], dim=1),
    lambda t, x: t.gradient(x, dim=(0, 1), edge_order=2), lambda t, x: t.gradient(x, dim=-1),
    lambda t, x: t.gradient(x.long()), lambda t, x: t.gradient(x[0, :1]),
    lambda t, x: t.gradient(x[0, :2], edge_order=2), lambda t, x: t.gradient(x, edge_order=3),
    lambda t, x: t.gradient(x, spacing=[1.0, 2, 3]),
    lambda t, x: t.gradient(x, spacing=[1.0, 2], dim=1),
    lambda t, x: t.gradient(x, spacing=[t.tensor([0.0, 1, 3]), 2.0]),
    lambda t, x: t.gradient(x, dim=[0, 0]), lambda t, x: t.gradient(x, dim=5),
    lambda t, x: t.gradient(x, spacing=t.tensor(2.0)),
    lambda t, x: t.gradient(x[0, :2]),
])
def test_gradient(fn):
    same(fn, G, rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_gradient_compiled_matches_eager():
    def f(x):
        gy, gx = llgrad.gradient(x, spacing=[2.0, 0.5], edge_order=2)
        return (gy * gx).sum()

    cf = llgrad.compile(f)
    for _ in range(2):
        x = llgrad.randn(5, 4, requires_grad=True)
        x2 = x.detach().requires_grad_(True)
        out, ref = cf(x), f(x2)
        out.backward()
        ref.backward()
        np.testing.assert_allclose(out.item(), ref.item(), rtol=1e-5)
        np.testing.assert_allclose(x.grad.numpy(), x2.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_poisson_and_binomial_statistics():
    llgrad.manual_seed(0)
    rates = llgrad.full((20000,), 3.5, requires_grad=True)
    draw = llgrad.poisson(rates)
    assert draw.dtype == llgrad.float32 and type(draw.grad_fn).__name__ == "PoissonBackward0"
    assert abs(draw.mean().item() - 3.5) < 0.06 and abs(draw.var().item() - 3.5) < 0.15
    draw.sum().backward()
    assert (rates.grad.numpy() == 0).all()
    assert llgrad.poisson(llgrad.zeros(3)).tolist() == [0.0, 0.0, 0.0]
    g = llgrad.Generator().manual_seed(5)
    a = llgrad.poisson(llgrad.full((5,), 2.0), generator=g)
    b = llgrad.poisson(llgrad.full((5,), 2.0), generator=llgrad.Generator().manual_seed(5))
    assert a.tolist() == b.tolist()
    b = llgrad.binomial(llgrad.full((20000,), 10.0, dtype=llgrad.float64),
                        llgrad.full((20000,), 0.3, dtype=llgrad.float64))
    assert b.dtype == llgrad.float64
    assert abs(b.mean().item() - 3.0) < 0.05 and abs(b.var().item() - 2.1) < 0.1
    assert llgrad.binomial(llgrad.tensor([1.0, 2]), llgrad.tensor([1.5, 0.5])).tolist()[0] == 1
    c = llgrad.tensor([10.0, 20.0], requires_grad=True)
    out = llgrad.binomial(c, llgrad.tensor([0.5, 0.1]))
    with pytest.raises(RuntimeError, match="derivative for aten::binomial is not implemented"):
        out.sum().backward()


@pytest.mark.parametrize("fn", [
    lambda t, x: t.poisson(x.long()), lambda t, x: t.poisson(x * 0 - 1),
    lambda t, x: t.binomial(x.long(), x), lambda t, x: t.binomial(x, x.double()),
    lambda t, x: t.binomial(1.0, x),
])
def test_random_errors(fn):
    same(fn, np.array([0.5, 0.25], np.float32), grad=False)


X = R.standard_normal((3, 4, 5)).astype(np.float32)


@pytest.mark.parametrize("fn", [
    lambda t, x: t.frobenius_norm(x, [1, 2]), lambda t, x: t.frobenius_norm(x, [1], True),
    lambda t, x: t.frobenius_norm(x, 0), lambda t, x: t.frobenius_norm(x, [0, 1, 2]),
    lambda t, x: t.nuclear_norm(x[0]), lambda t, x: t.nuclear_norm(x, [1, 2], True),
    lambda t, x: t.nuclear_norm(x, (0, 2)), lambda t, x: t.nuclear_norm(x[0], True),
    lambda t, x: t.nuclear_norm(x),
])
def test_deprecated_norms(fn):
    same(fn, X, rtol=1e-5, atol=1e-5)
