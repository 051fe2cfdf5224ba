"""svd_lowrank / pca_lowrank against PyTorch's with the same seed (llgrad draws PyTorch's
numbers, so the factors agree up to rounding and the columns' signs), and their gradients
against float64 finite differences."""
import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


def _both(name, a, seed=3, **kw):
    torch.manual_seed(seed)
    want = getattr(torch, name)(torch.tensor(a), **kw)
    llgrad.manual_seed(seed)
    got = getattr(llgrad, name)(llgrad.tensor(a), **kw)
    return got, want


def _same(got, want, tol):
    for g, w in zip(got, want):
        g, w = g.detach().numpy(), w.detach().numpy()
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(np.abs(g), np.abs(w), atol=tol)


@pytest.mark.parametrize("shape", [(20, 8), (8, 20), (3, 12, 7)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kw", [{}, {"q": 3}, {"q": 4, "niter": 0}])
def test_svd_lowrank_is_torch_s(shape, dtype, kw):
    a = np.random.default_rng(0).standard_normal(shape).astype(dtype)
    _same(*_both("svd_lowrank", a, **kw), 1e-4 if dtype == np.float32 else 1e-10)


def test_svd_lowrank_of_a_difference_is_torch_s():
    rng = np.random.default_rng(1)
    a, m = rng.standard_normal((10, 6)), rng.standard_normal((1, 6))
    torch.manual_seed(0)
    want = torch.svd_lowrank(torch.tensor(a), q=4, M=torch.tensor(m))
    llgrad.manual_seed(0)
    got = llgrad.svd_lowrank(llgrad.tensor(a), q=4, M=llgrad.tensor(m))
    _same(got, want, 1e-10)


@pytest.mark.parametrize("kw", [{}, {"q": 2}, {"center": False}, {"q": 5, "niter": 3}])
def test_pca_lowrank_is_torch_s(kw):
    a = np.random.default_rng(2).standard_normal((30, 7))
    _same(*_both("pca_lowrank", a, **kw), 1e-10)


def test_pca_lowrank_refuses_what_torch_refuses():
    a = llgrad.randn(5, 4)
    with pytest.raises(ValueError, match="not greater than min"):
        llgrad.pca_lowrank(a, q=5)
    with pytest.raises(ValueError, match="niter"):
        llgrad.pca_lowrank(a, niter=-1)


def test_the_singular_values_gradient_matches_finite_differences():
    a = llgrad.tensor(np.random.default_rng(4).standard_normal((9, 5)), requires_grad=True)

    def top_values(x):
        llgrad.manual_seed(0)               # (the same random basis at every evaluation)
        return llgrad.svd_lowrank(x, q=5)[1]
    assert llgrad.autograd.gradcheck(top_values, (a,), eps=1e-6, atol=1e-5)
