"""llgrad.distributions against torch.distributions: LowRankMultivariateNormal, VonMises,
LKJCholesky, Wishart, and the cdf of Gamma, Chi2 and InverseGamma (the incomplete gamma
function of _special.py)
(log_prob, entropy, moments, matrices, shapes, expand, gradients, validation errors,
reparameterised draws on the same noise, sample statistics)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402
from llgrad.distributions import _special  # noqa: E402

torch.broadcast_shapes((1,), ())    # (its first call imports torch._refs: ~1 s, at collection)


@pytest.fixture(autouse=True)
def _torch_validates():
    before = torch.distributions.Distribution._validate_args
    torch.distributions.Distribution.set_default_validate_args(True)
    yield
    torch.distributions.Distribution.set_default_validate_args(before)


def _data(lib, *shape, seed=0, lo=None, hi=None, positive=False):
    rng = np.random.default_rng(seed + 13 * len(shape) + sum(shape))
    a = rng.uniform(lo, hi, shape) if lo is not None else rng.standard_normal(shape)
    a = np.abs(a) + 0.3 if positive else a
    return lib.tensor(a.astype(np.float32))


def _same(fn, rtol=5e-5, atol=2e-5):
    want, got = fn(torch), fn(llgrad)
    assert len(want) == len(got)
    for i, (a, b) in enumerate(zip(want, got)):
        if isinstance(a, (tuple, bool, str, int)):
            assert (tuple(b) if isinstance(a, tuple) else b) == a, i
        else:
            np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=rtol,
                                       atol=atol, err_msg=f"item {i}")


def _lowrank(t):
    loc = _data(t, 2, 4).requires_grad_()
    W = _data(t, 4, 2, seed=1).requires_grad_()
    diag = _data(t, 2, 4, seed=2, positive=True).requires_grad_()
    return loc, W, diag


def test_lowrank_multivariate_normal_matches_torch():
    def f(t):
        loc, W, diag = _lowrank(t)
        d = t.distributions.LowRankMultivariateNormal(loc, W, diag)
        x = _data(t, 3, 2, 4, seed=3)
        lp = d.log_prob(x)
        (lp.sum() + d.entropy().sum() + d.variance.sum() + d.scale_tril.sum()
         + d.precision_matrix.sum()).backward()
        e = d.expand((3, 2))
        return [lp, d.entropy(), d.mean, d.mode, d.variance, d.stddev, d.covariance_matrix,
                d.precision_matrix, d.scale_tril, loc.grad, W.grad, diag.grad,
                tuple(d.batch_shape), tuple(d.event_shape), tuple(d.cov_factor.shape),
                tuple(d.sample((5,)).shape), tuple(e.batch_shape), e.log_prob(x), e.entropy(),
                tuple(e.cov_factor.shape), d.has_rsample]
    _same(f, rtol=2e-4)


def test_lowrank_agrees_with_the_full_multivariate_normal():
    loc, W, diag = _lowrank(llgrad)
    D = llgrad.distributions
    low = D.LowRankMultivariateNormal(loc, W, diag)
    full = D.MultivariateNormal(loc, covariance_matrix=low.covariance_matrix)
    x = _data(llgrad, 3, 2, 4, seed=3)
    np.testing.assert_allclose(low.log_prob(x).detach().numpy(),
                               full.log_prob(x).detach().numpy(), rtol=1e-4)
    np.testing.assert_allclose(low.entropy().detach().numpy(), full.entropy().detach().numpy(),
                               rtol=1e-5)


def test_lowrank_rsample_is_torchs_formula_on_the_same_noise():
    loc, W, diag = _lowrank(llgrad)
    llgrad.manual_seed(7)
    x = llgrad.distributions.LowRankMultivariateNormal(loc, W, diag).rsample((5,))
    (x ** 2).sum().backward()
    llgrad.manual_seed(7)
    eps_w = torch.tensor(llgrad.randn(5, 2, 2).numpy())
    eps_d = torch.tensor(llgrad.randn(5, 2, 4).numpy())
    tl, tw, td = (torch.tensor(a.detach().numpy()).requires_grad_() for a in (loc, W, diag))
    y = tl + (tw @ eps_w.unsqueeze(-1)).squeeze(-1) + td.sqrt() * eps_d
    (y ** 2).sum().backward()
    np.testing.assert_allclose(x.detach().numpy(), y.detach().numpy(), rtol=1e-5, atol=1e-6)
    for a, b in ((loc, tl), (W, tw), (diag, td)):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_lowrank_sample_statistics():
    llgrad.manual_seed(0)
    loc, W, diag = (a.detach() for a in _lowrank(llgrad))
    d = llgrad.distributions.LowRankMultivariateNormal(loc, W, diag)
    s = d.sample((20000,))
    np.testing.assert_allclose(s.mean(0).numpy(), loc.numpy(), atol=0.05)
    c = s[:, 0] - s[:, 0].mean(0)
    cov = (c.unsqueeze(-1) * c.unsqueeze(-2)).mean(0)
    # (a variance of 6.3 from 20,000 draws has a standard deviation of 0.09)
    np.testing.assert_allclose(cov.numpy(), d.covariance_matrix[0].numpy(), atol=0.1, rtol=0.05)


@pytest.mark.parametrize("bad", [
    lambda D, t: D.LowRankMultivariateNormal(t.zeros(3), t.ones(3, 1), t.tensor([1., 0., 1.])),
    lambda D, t: D.LowRankMultivariateNormal(t.tensor(0.), t.ones(3, 1), t.ones(3)),
    lambda D, t: D.LowRankMultivariateNormal(t.zeros(3), t.ones(3), t.ones(3)),
    lambda D, t: D.LowRankMultivariateNormal(t.zeros(3), t.ones(2, 1), t.ones(3)),
    lambda D, t: D.LowRankMultivariateNormal(t.zeros(3), t.ones(3, 1), t.ones(2)),
    lambda D, t: D.LowRankMultivariateNormal(t.zeros(2, 3), t.ones(4, 3, 1), t.ones(3)),
    lambda D, t: D.VonMises(t.zeros(2), t.tensor([1., -1.])),
    lambda D, t: D.VonMises(t.tensor(0.), t.tensor(1.)).log_prob(t.tensor(float("nan"))),
    lambda D, t: D.LKJCholesky(1, 1.),
    lambda D, t: D.LKJCholesky(3, t.tensor([1., 0.])),
    lambda D, t: D.LKJCholesky(2, 1.).log_prob(t.tensor([[1., 0.], [0.5, 0.5]])),
    lambda D, t: D.Wishart(t.tensor([1.5]), t.eye(3)),
    lambda D, t: D.Wishart(4., t.ones(3)),
    lambda D, t: D.Wishart(4., t.tensor([[1., 2.], [2., 1.]])),
    lambda D, t: D.Wishart(4., scale_tril=t.tensor([[1., 0.], [2., -1.]])),
    lambda D, t: D.Wishart(4., t.eye(2)).log_prob(t.tensor([[1., 2.], [2., 1.]])),
])
def test_errors_as_torch(bad):
    with pytest.raises(ValueError) as want:
        bad(torch.distributions, torch)
    with pytest.raises(ValueError) as got:
        bad(llgrad.distributions, llgrad)
    got = str(got.value).replace("llgrad.Size", "torch.Size")
    assert got.split("(")[0] == str(want.value).split("(")[0]


def test_von_mises_matches_torch():
    def f(t):
        loc = _data(t, 2, 3).requires_grad_()
        conc = t.tensor([0.01, 0.8, 3.0, 3.8, 10., 50.]).reshape(2, 3).requires_grad_()
        d = t.distributions.VonMises(loc, conc)
        x = _data(t, 4, 2, 3, seed=1, lo=-3.1, hi=3.1)
        lp = d.log_prob(x)
        (lp.sum() + d.variance.sum()).backward()
        e = d.expand((4, 2, 3))
        return [lp, d.mean, d.mode, d.variance, loc.grad, conc.grad, tuple(d.batch_shape),
                tuple(d.event_shape), d.has_rsample, tuple(d.sample((5,)).shape),
                tuple(e.batch_shape), e.log_prob(x), type(e).__name__,
                d.sample().dtype == t.float32]
    _same(f)


def test_von_mises_sample_statistics():
    """The circular mean and the circular variance 1 - I1(k) / I0(k) of many draws."""
    llgrad.manual_seed(0)
    loc = llgrad.tensor([0., 2., -3., 1.])
    d = llgrad.distributions.VonMises(loc, llgrad.tensor([0.5, 4., 20., 1e-6]))
    s = d.sample((20000,)).numpy().astype(np.float64)
    assert s.min() >= -np.pi and s.max() <= np.pi
    r = np.exp(1j * s).mean(0)
    np.testing.assert_allclose(np.angle(r[:3]), loc.numpy()[:3], atol=0.05)
    np.testing.assert_allclose(1 - np.abs(r), d.variance.numpy(), atol=0.015)


def test_lkj_cholesky_matches_torch():
    def f(t):
        conc = t.tensor([0.5, 1., 3.]).requires_grad_()
        d = t.distributions.LKJCholesky(4, conc)
        x = t.distributions.transforms.CorrCholeskyTransform()(_data(t, 2, 3, 6))
        lp = d.log_prob(x)
        lp.sum().backward()
        e = d.expand((2, 3))
        return [lp, conc.grad, tuple(d.batch_shape), tuple(d.event_shape),
                tuple(d.sample((5,)).shape), tuple(e.batch_shape), e.log_prob(x),
                repr(d.support), d.has_rsample, d.sample().dtype == t.float32]
    _same(f, rtol=1e-4)


def test_lkj_cholesky_sample_statistics():
    """Draws are correlation Cholesky factors; the first correlation has LKJ's variance
    1 / (2 eta + d - 1), and the later ones the variance of torch's draws (whose onion
    sampler widens them)."""
    llgrad.manual_seed(0)
    torch.manual_seed(0)
    eta, dim, n = [0.7, 4.], 3, 6000
    L = llgrad.distributions.LKJCholesky(dim, llgrad.tensor(eta)).sample((n,))
    assert bool(llgrad.distributions.constraints.corr_cholesky.check(L).all())
    corr = (L @ L.mT).numpy()
    tL = torch.distributions.LKJCholesky(dim, torch.tensor(eta)).sample((2 * n,))
    tcorr = (tL @ tL.mT).numpy()
    np.testing.assert_allclose(corr[..., 1, 0].var(0), 1 / (2 * np.array(eta) + dim - 1),
                               rtol=0.07)
    for i, j in ((2, 0), (2, 1)):
        np.testing.assert_allclose(corr[..., i, j].mean(0), 0, atol=0.03)
        np.testing.assert_allclose(corr[..., i, j].var(0), tcorr[..., i, j].var(0), rtol=0.08)


def _spd(t, seed):
    a = _data(t, 2, 3, 3, seed=seed)
    return a @ a.mT + t.eye(3)


@pytest.mark.parametrize("param", ["covariance_matrix", "precision_matrix", "scale_tril"])
def test_wishart_matches_torch(param):
    def f(t):
        df = t.tensor([4.5, 7.]).requires_grad_()
        m = _spd(t, 1)
        m = t.linalg.cholesky(m) if param == "scale_tril" else m
        m.requires_grad_()
        d = t.distributions.Wishart(df, **{param: m})
        x = _spd(t, 2)
        lp = d.log_prob(x)
        (lp.sum() + d.entropy().sum()).backward()
        e = d.expand((4, 2))
        # (torch's cholesky_solve backward also fills the upper triangle of scale_tril's
        # gradient, which the solve never reads; llgrad's leaves it 0)
        grad = m.grad.tril() if param == "scale_tril" else m.grad
        return [lp, d.entropy(), d.mean, d.mode, d.variance, d.covariance_matrix,
                d.precision_matrix, d.scale_tril, df.grad, grad, tuple(d.batch_shape),
                tuple(d.event_shape), tuple(d.rsample((5,)).shape), tuple(e.batch_shape),
                e.log_prob(x), e.mean, d.has_rsample]
    _same(f, rtol=1e-4, atol=1e-4)


def test_wishart_rsample_statistics_and_gradients():
    """E[W] = df * V, and the draws carry gradients to df and the scale."""
    llgrad.manual_seed(0)
    df = llgrad.tensor(6.).requires_grad_()
    L = llgrad.linalg.cholesky(_spd(llgrad, 1)[0] / 3).requires_grad_()
    d = llgrad.distributions.Wishart(df, scale_tril=L)
    s = d.rsample((4000,))
    assert bool(d.support.check(s).all())
    np.testing.assert_allclose(s.mean(0).detach().numpy(), d.mean.detach().numpy(), rtol=0.05,
                               atol=0.05 * float(d.mean.detach().abs().max()))
    np.testing.assert_allclose(s.var(0).detach().numpy(), d.variance.detach().numpy(),
                               rtol=0.15, atol=0.05 * float(d.variance.detach().max()))
    s.diagonal(dim1=-2, dim2=-1).sum().div(4000).backward()
    # d E[trace W] / d df = trace V, the implicit Chi2 gradient on average
    np.testing.assert_allclose(float(df.grad), float(d.covariance_matrix.detach().trace()),
                               rtol=0.05)
    assert np.isfinite(L.grad.numpy()).all()


@pytest.mark.slow
def test_compiled_rsample_step_replays_eager():
    """Reparameterised draws of the new distributions inside llgrad.compile: the generator's
    draws are traced, and the compiled steps give eager's numbers and gradients."""
    D = llgrad.distributions

    def step(s):
        x = (D.Cauchy(0., s).rsample((8,)).clamp(-5, 5) + D.Gumbel(0., s).rsample((8,))
             + D.RelaxedBernoulli(llgrad.tensor(0.5), s.sigmoid()).rsample((8,))
             + D.ContinuousBernoulli(s.sigmoid()).rsample((8,))
             + D.Kumaraswamy(s, s).rsample((8,))
             + D.LowRankMultivariateNormal(s, s.unsqueeze(-1), s).rsample((8,)))
        return (x ** 2).mean()
    results = []
    for fn in (step, llgrad.compile(step)):
        llgrad.manual_seed(3)
        s = llgrad.tensor([0.7, 3.]).requires_grad_()
        outs = []
        for _ in range(3):
            out = fn(s)
            out.backward()
            outs.append(float(out.detach()))
        results.append((outs, s.grad.numpy().copy()))
    np.testing.assert_allclose(results[1][0], results[0][0], rtol=1e-5)
    np.testing.assert_allclose(results[1][1], results[0][1], rtol=1e-4)


def test_gammainc_matches_torch():
    rng = np.random.default_rng(0)
    a = np.exp(rng.uniform(-3, 6, 3000))
    x = a * np.exp(rng.uniform(-4, 2, 3000))
    x[:3] = [0., np.inf, 1e-30]
    for dt, rtol in ((np.float64, 1e-8), (np.float32, 1e-4)):
        want = torch.special.gammainc(torch.tensor(a.astype(dt)), torch.tensor(x.astype(dt)))
        got = _special.gammainc(llgrad.tensor(a.astype(dt)), llgrad.tensor(x.astype(dt)))
        assert got.dtype == (llgrad.float64 if dt == np.float64 else llgrad.float32)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=rtol, atol=10 * rtol ** 2)


def test_gamma_chi2_inverse_gamma_cdf_match_torch():
    def f(t):
        D = t.distributions
        conc = t.tensor([0.5, 2., 7., 30.])
        rate = t.tensor([1., 0.5, 3., 2.]).requires_grad_()
        x = t.tensor([[0.3, 4., 2., 14.], [2., 0.1, 0.5, 20.]]).requires_grad_()
        cdfs = [D.Gamma(conc, rate).cdf(x), D.Chi2(conc * 3).cdf(x),
                D.InverseGamma(conc, rate).cdf(x)]
        sum(c.sum() for c in cdfs).backward()
        return cdfs + [rate.grad, x.grad]
    _same(f, rtol=1e-4, atol=1e-6)
