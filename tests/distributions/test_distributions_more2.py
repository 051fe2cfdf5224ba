"""llgrad.distributions against torch.distributions: Beta, Gamma, Chi2, Dirichlet,
Exponential, Laplace, LogNormal, OneHotCategorical, Poisson, Binomial, Geometric, StudentT,
the transforms and TransformedDistribution (log_prob, entropy, moments, cdf, shapes,
expand, gradients, validation errors, kl_divergence of the pairs PyTorch registers), the
implicit reparameterisation gradients of Gamma/Dirichlet draws against PyTorch's kernels,
sample statistics, and a compiled loss equal to eager."""
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402
from llgrad.distributions import _samplers  # noqa: E402


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


def _check(a, b, what):
    if isinstance(a, (tuple, bool, str, int)):
        assert (tuple(b) if isinstance(a, tuple) else b) == a, what
    else:
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=2e-5,
                                   atol=1e-5, err_msg=what)


def _same(fn):
    want, got = fn(torch), fn(llgrad)
    assert len(want) == len(got)
    for i, (a, b) in enumerate(zip(want, got)):
        _check(a, b, f"item {i}")


# name -> (make(t) -> (dist, params needing grads), value(t))
CASES = {
    "Gamma": (lambda t, p: t.distributions.Gamma(p[0], p[1]),
              lambda t: [_data(t, 3, 4, positive=True), _data(t, 4, seed=1, positive=True)],
              lambda t: _data(t, 2, 3, 4, seed=2, positive=True)),
    "Chi2": (lambda t, p: t.distributions.Chi2(p[0]),
             lambda t: [_data(t, 5, positive=True) * 3],
             lambda t: _data(t, 2, 5, seed=2, positive=True)),
    "Beta": (lambda t, p: t.distributions.Beta(p[0], p[1]),
             lambda t: [_data(t, 3, 4, positive=True), _data(t, 3, 4, seed=1, positive=True)],
             lambda t: _data(t, 3, 4, seed=2, lo=0.01, hi=0.99)),
    "Dirichlet": (lambda t, p: t.distributions.Dirichlet(p[0]),
                  lambda t: [_data(t, 2, 3, 4, positive=True)],
                  lambda t: t.softmax(_data(t, 5, 2, 3, 4, seed=3), -1)),
    "Exponential": (lambda t, p: t.distributions.Exponential(p[0]),
                    lambda t: [_data(t, 3, 4, positive=True)],
                    lambda t: _data(t, 3, 4, seed=2, positive=True)),
    "Laplace": (lambda t, p: t.distributions.Laplace(p[0], p[1]),
                lambda t: [_data(t, 3, 4), _data(t, 3, 4, seed=1, positive=True)],
                lambda t: _data(t, 2, 3, 4, seed=2)),
    "LogNormal": (lambda t, p: t.distributions.LogNormal(p[0], p[1]),
                  lambda t: [_data(t, 3, 4), _data(t, 3, 4, seed=1, positive=True)],
                  lambda t: _data(t, 3, 4, seed=2, positive=True)),
    "StudentT": (lambda t, p: t.distributions.StudentT(p[0], p[1], p[2]),
                 lambda t: [_data(t, 6, positive=True) * 2, _data(t, 6, seed=1),
                            _data(t, 6, seed=2, positive=True)],
                 lambda t: _data(t, 3, 6, seed=3)),
    "Poisson": (lambda t, p: t.distributions.Poisson(p[0]),
                lambda t: [_data(t, 5, positive=True) * 4],
                lambda t: t.tensor([[0., 1., 2., 7., 3.], [4., 0., 1., 1., 9.]])),
    "Geometric": (lambda t, p: t.distributions.Geometric(p[0]),
                  lambda t: [_data(t, 5, lo=0.05, hi=0.95)],
                  lambda t: t.tensor([[0., 1., 2., 7., 3.], [4., 0., 1., 1., 9.]])),
    "GeometricLogits": (lambda t, p: t.distributions.Geometric(logits=p[0]),
                        lambda t: [_data(t, 5)],
                        lambda t: t.tensor([0., 1., 2., 7., 3.])),
    "Binomial": (lambda t, p: t.distributions.Binomial(t.tensor([3., 10., 4., 1., 6.]), p[0]),
                 lambda t: [_data(t, 5, lo=0.05, hi=0.95)],
                 lambda t: t.tensor([[0., 1., 2., 1., 3.], [3., 10., 4., 0., 6.]])),
    "BinomialLogits": (lambda t, p: t.distributions.Binomial(5, logits=p[0]),
                       lambda t: [_data(t, 2, 3)],
                       lambda t: t.tensor([[0., 1., 5.], [3., 2., 4.]])),
    "OneHotCategorical": (lambda t, p: t.distributions.OneHotCategorical(logits=p[0]),
                          lambda t: [_data(t, 3, 4)],
                          lambda t: t.eye(4)[t.tensor([[0, 3, 1], [2, 2, 0]])]),
}
HAS_ENTROPY = set(CASES) - {"Poisson", "Binomial"}


@pytest.mark.parametrize("name", sorted(CASES))
def test_log_prob_moments_entropy_shapes_and_grads(name):
    make, params, value = CASES[name]

    def f(t):
        ps = [p.requires_grad_() for p in params(t)]
        d = make(t, ps)
        lp = d.log_prob(value(t))
        out = [lp, d.mean, d.variance, tuple(d.batch_shape), tuple(d.event_shape),
               d.has_rsample, tuple(d.sample((2,)).shape)]
        total = lp.sum()
        if name in HAS_ENTROPY:
            out.append(d.entropy())
            total = total + d.entropy().sum()
        if name not in ("StudentT", "Beta", "Dirichlet"):
            out.append(d.mode)
        total.backward()
        out += [p.grad for p in ps]
        e = d.expand((2,) + tuple(d.batch_shape))
        v = value(t)
        v = v.reshape((-1,) + tuple(d.batch_shape) + tuple(d.event_shape))[:1]
        out += [tuple(e.batch_shape), e.log_prob(v), e.mean]
        if d.has_rsample:
            out.append(tuple(d.rsample((3,)).shape))
        return out
    _same(f)


def test_cdf_icdf_and_modes():
    def f(t):
        D = t.distributions
        x = _data(t, 7, seed=4, positive=True)
        u = _data(t, 7, seed=5, lo=0.05, hi=0.95)
        e, la, ln = D.Exponential(_data(t, 7, positive=True)), D.Laplace(0.5, 2.), \
            D.LogNormal(0.2, 0.7)
        beta = D.Beta(_data(t, 4, positive=True) * 3, _data(t, 4, seed=1, positive=True) * 3)
        return [e.cdf(x), e.icdf(u), la.cdf(x - 1), la.icdf(u), ln.cdf(x), ln.icdf(u),
                beta.mode, D.StudentT(_data(t, 4, positive=True) * 3).mode, e.stddev, la.stddev,
                D.Dirichlet(t.tensor([[0.5, 0.7, 0.2], [2., 3., 4.]])).mode,
                D.StudentT(t.tensor([0.5, 1.5, 3.])).variance,
                D.StudentT(t.tensor([0.5, 1.5, 3.])).mean]
    _same(f)


def _pairs(t):
    D = t.distributions
    a, b = _data(t, 4, positive=True), _data(t, 4, seed=1, positive=True)
    c, d = _data(t, 4, seed=2, positive=True), _data(t, 4, seed=3, positive=True)
    loc, loc2 = _data(t, 4, seed=4), _data(t, 4, seed=5)
    pr, pr2 = _data(t, 4, seed=6, lo=0.1, hi=0.9), _data(t, 4, seed=7, lo=0.1, hi=0.9)
    lo, hi = _data(t, 4, seed=8, lo=0.05, hi=0.4), _data(t, 4, seed=9, lo=0.5, hi=0.95)
    beta, gamma, expo = D.Beta(a, b), D.Gamma(c, d), D.Exponential(a)
    normal, lap, unif = D.Normal(loc, a), D.Laplace(loc2, c), D.Uniform(lo, hi)
    pois = D.Poisson(b * 3)
    return [
        (beta, D.Beta(c, d)), (D.Binomial(5, pr), D.Binomial(5, pr2)),
        (D.Dirichlet(t.stack([a, b, c], -1)), D.Dirichlet(t.stack([d, a, b], -1))),
        (expo, D.Exponential(b)), (gamma, D.Gamma(a, b)), (D.Geometric(pr), D.Geometric(pr2)),
        (lap, D.Laplace(loc, b)), (D.OneHotCategorical(t.stack([a, b, c], -1)),
                                   D.OneHotCategorical(t.stack([d, c, a], -1))),
        (pois, D.Poisson(c)), (D.LogNormal(loc, a), D.LogNormal(loc2, b)),
        (D.Bernoulli(pr), pois), (beta, expo), (beta, gamma), (beta, normal),
        (beta, D.Uniform(t.zeros(4), t.ones(4))), (beta, unif), (expo, beta), (expo, unif),
        (expo, gamma), (expo, normal), (gamma, beta), (gamma, unif), (gamma, expo),
        (gamma, normal), (lap, beta), (lap, expo), (lap, gamma), (lap, unif), (lap, normal),
        (normal, beta), (normal, expo), (normal, gamma), (normal, unif), (normal, lap),
        (pois, D.Bernoulli(pr)), (pois, D.Binomial(5, pr)), (unif, beta), (unif, expo),
        (unif, gamma), (D.Uniform(loc - 3, loc - 2), expo), (D.Uniform(loc, loc + 2), beta),
        (D.Binomial(t.tensor([5., 6., 5., 7.]), pr), D.Binomial(5, pr2)),
    ]


def test_kl_divergence_of_registered_pairs():
    def f(t):
        return [t.distributions.kl_divergence(p, q) for p, q in _pairs(t)]
    _same(f)
    for lib in (torch, llgrad):
        D = lib.distributions
        with pytest.raises(NotImplementedError):
            D.kl_divergence(D.Binomial(2, lib.tensor([0.3])), D.Binomial(5, lib.tensor([0.3])))
        with pytest.raises(NotImplementedError):
            D.kl_divergence(D.Poisson(lib.tensor([2.])), D.Gamma(1., 1.))


def test_kl_gradients():
    def f(t):
        D = t.distributions
        a = _data(t, 4, positive=True).requires_grad_()
        b = _data(t, 4, seed=1, positive=True).requires_grad_()
        kl = (D.kl_divergence(D.Beta(a, b), D.Beta(b, a + 1)).sum()
              + D.kl_divergence(D.Gamma(a, b), D.Normal(a, b)).sum()
              + D.kl_divergence(D.Dirichlet(t.stack([a, b], -1)),
                                D.Dirichlet(t.stack([b, b], -1))).sum())
        kl.backward()
        return [kl, a.grad, b.grad]
    _same(f)


def test_transforms_and_transformed_distribution():
    def f(t):
        D, T = t.distributions, t.distributions.transforms
        x = _data(t, 3, 4)
        s = _data(t, 4, seed=1, positive=True)
        out = []
        for tr in (T.ExpTransform(), T.SigmoidTransform(), T.TanhTransform(),
                   T.AffineTransform(_data(t, 4, seed=2), s),
                   T.AffineTransform(1.5, -2.0), T.AffineTransform(0., s, event_dim=1),
                   T.ComposeTransform([T.AffineTransform(0.5, 2.), T.TanhTransform()]),
                   T.ExpTransform().inv):
            y = tr(x * 0.5)
            out += [y, tr.inv(y), tr.log_abs_det_jacobian(x * 0.5, y),
                    tr.domain.event_dim, tr.codomain.event_dim, tr.bijective]
        loc = _data(t, 3, 4, seed=3).requires_grad_()
        base = D.Normal(loc, s)
        logit_normal = D.TransformedDistribution(base, [T.AffineTransform(0.5, 2.),
                                                        T.SigmoidTransform()])
        tanh_normal = D.TransformedDistribution(D.Independent(base, 1), T.TanhTransform())
        u = _data(t, 3, 4, seed=4, lo=0.05, hi=0.95)
        lp = logit_normal.log_prob(u)
        lp2 = tanh_normal.log_prob(u * 2 - 1)
        (lp.sum() + lp2.sum()).backward()
        out += [lp, lp2, loc.grad, tuple(tanh_normal.batch_shape),
                tuple(tanh_normal.event_shape), logit_normal.cdf(u), logit_normal.icdf(u),
                tuple(logit_normal.rsample((5,)).shape), repr(tanh_normal.support),
                tuple(logit_normal.expand((2, 3, 4)).batch_shape)]
        return out
    _same(f)
    T = llgrad.distributions.transforms
    assert T.ExpTransform() == T.ExpTransform() and T.ExpTransform().inv.inv == T.ExpTransform()
    c = T.ExpTransform().with_cache(1)
    x = llgrad.ones(2)
    y = c(x)
    assert c(x) is y and c.inv(y) is x
    with pytest.raises(ValueError, match="cache_size must be 0 or 1"):
        T.ExpTransform(cache_size=2)


@pytest.mark.parametrize("bad", [
    lambda D, t: D.Gamma(t.tensor([1., -1.]), 1.),
    lambda D, t: D.Beta(t.tensor([0., 1.]), t.tensor([1., 1.])),
    lambda D, t: D.Dirichlet(t.tensor([1., -2.])),
    lambda D, t: D.Exponential(t.tensor([0.])),
    lambda D, t: D.Laplace(t.tensor([0.]), t.tensor([-1.])),
    lambda D, t: D.LogNormal(0., -1.),
    lambda D, t: D.Poisson(t.tensor([-1.])),
    lambda D, t: D.Geometric(t.tensor([0.])),
    lambda D, t: D.Geometric(t.tensor([1.5])),
    lambda D, t: D.Binomial(t.tensor([2.5]), t.tensor([0.5])),
    lambda D, t: D.StudentT(t.tensor([-1.])),
    lambda D, t: D.OneHotCategorical(t.tensor([-0.5, 1.5])),
])
def test_invalid_parameters_raise_as_torch(bad):
    with pytest.raises(ValueError) as want:
        bad(torch.distributions, torch)
    with pytest.raises(ValueError) as got:
        bad(llgrad.distributions, llgrad)
    head = str(want.value).split("(")[0]
    assert str(got.value).startswith(head)
    assert ("to satisfy the constraint" in str(got.value)) == \
        ("to satisfy the constraint" in str(want.value))


@pytest.mark.parametrize("bad", [
    lambda D, t: D.Gamma(1., 1.).log_prob(t.tensor(-1.)),
    lambda D, t: D.Beta(1., 1.).log_prob(t.tensor(1.5)),
    lambda D, t: D.Dirichlet(t.ones(3)).log_prob(t.tensor([0.5, 0.5, 0.5])),
    lambda D, t: D.Poisson(t.tensor(1.)).log_prob(t.tensor(1.5)),
    lambda D, t: D.Binomial(3, t.tensor(0.5)).log_prob(t.tensor(4.)),
    lambda D, t: D.OneHotCategorical(t.ones(3)).log_prob(t.tensor([1., 1., 0.])),
    lambda D, t: D.LogNormal(0., 1.).log_prob(t.tensor(-1.)),
])
def test_values_outside_the_support_raise_as_torch(bad):
    with pytest.raises(ValueError, match="to be within the support"):
        bad(torch.distributions, torch)
    with pytest.raises(ValueError, match="to be within the support"):
        bad(llgrad.distributions, llgrad)


def test_gamma_and_dirichlet_gradients_equal_pytorchs_kernels():
    rng = np.random.default_rng(0)
    a = np.exp(rng.uniform(-3, 4, 3000))
    x = np.exp(rng.uniform(-5, 3, 3000)) * a
    for dt in (np.float32, np.float64):
        want = torch._standard_gamma_grad(torch.tensor(a.astype(dt)), torch.tensor(x.astype(dt)))
        got = _samplers.standard_gamma_grad(llgrad.tensor(a.astype(dt)),
                                            llgrad.tensor(x.astype(dt)))
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5)
    xs = rng.uniform(0, 1, 3000)
    al = np.exp(rng.uniform(-3, 3, 3000))
    tot = al + np.exp(rng.uniform(-3, 3, 3000))
    for dt, rtol in ((np.float64, 1e-6), (np.float32, 2e-3)):
        args = [v.astype(dt) for v in (xs, al, tot)]
        want = torch._dirichlet_grad(*[torch.tensor(v) for v in args])
        got = _samplers.dirichlet_grad(*[llgrad.tensor(v) for v in args])
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=rtol, atol=1e-6)


def test_rsample_gradients_are_pytorchs_implicit_ones():
    llgrad.manual_seed(0)
    alpha = llgrad.tensor([0.3, 1.0, 2.5, 12.0], dtype=llgrad.float64).requires_grad_()
    x = llgrad.distributions.Gamma(alpha, 1.).rsample((50,))
    x.sum().backward()
    want = torch._standard_gamma_grad(torch.tensor(alpha.detach().numpy()).expand(50, 4),
                                      torch.tensor(x.detach().numpy())).sum(0)
    np.testing.assert_allclose(alpha.grad.numpy(), want.numpy(), rtol=1e-10)
    conc = llgrad.tensor([[0.5, 2., 3.], [4., 1., 0.2]], dtype=llgrad.float64).requires_grad_()
    d = llgrad.distributions.Dirichlet(conc).rsample((20,))
    g = np.random.default_rng(1).standard_normal(d.shape)
    d.backward(llgrad.tensor(g))
    tx, tc = torch.tensor(d.detach().numpy()), torch.tensor(conc.detach().numpy()).expand(20, 2, 3)
    from torch.distributions.dirichlet import _Dirichlet_backward
    want = _Dirichlet_backward(tx, tc, torch.tensor(g)).sum(0)
    np.testing.assert_allclose(conc.grad.numpy(), want.numpy(), rtol=1e-8, atol=1e-12)


def test_sample_statistics():
    llgrad.manual_seed(0)
    D, n = llgrad.distributions, 40000
    cases = [D.Gamma(llgrad.tensor([0.4, 3.]), llgrad.tensor([2., 0.5])),
             D.Beta(llgrad.tensor([0.5, 4.]), llgrad.tensor([2., 3.])),
             D.Exponential(llgrad.tensor([0.5, 3.])), D.Laplace(1., 2.),
             D.LogNormal(0., 0.5), D.Poisson(llgrad.tensor([0.3, 4., 30.])),
             D.Binomial(llgrad.tensor([3., 50., 400.]), llgrad.tensor([0.3, 0.8, 0.1])),
             D.Geometric(llgrad.tensor([0.2, 0.7])), D.StudentT(llgrad.tensor([5., 9.])),
             D.Chi2(llgrad.tensor([3.]))]
    for d in cases:
        s = d.sample((n,))
        assert bool(d.support.check(s).all()), d
        np.testing.assert_allclose(s.mean(0).numpy(), d.mean.numpy(), rtol=0.05, atol=0.03,
                                   err_msg=repr(d))
        np.testing.assert_allclose(s.var(0).numpy(), d.variance.numpy(), rtol=0.1, atol=0.03,
                                   err_msg=repr(d))
    dirichlet = D.Dirichlet(llgrad.tensor([0.5, 2., 3.]))
    s = dirichlet.sample((n,))
    np.testing.assert_allclose(s.sum(-1).numpy(), 1, rtol=1e-5)
    np.testing.assert_allclose(s.mean(0).numpy(), dirichlet.mean.numpy(), atol=0.01)
    oh = D.OneHotCategorical(llgrad.tensor([0.2, 0.5, 0.3])).sample((n,))
    np.testing.assert_allclose(oh.mean(0).numpy(), [0.2, 0.5, 0.3], atol=0.015)
    # the expected implicit gradient of a Gamma draw is d mean / d alpha = 1 / rate
    alpha = llgrad.tensor([0.5, 2., 7.]).requires_grad_()
    D.Gamma(alpha, 2.).rsample((n,)).mean(0).sum().backward()
    np.testing.assert_allclose(alpha.grad.numpy(), 0.5, rtol=0.05)


@pytest.mark.parametrize("backend", ["llvm", "interpret"])
def test_compiled_loss_equals_eager(backend):
    D = llgrad.distributions

    def loss(a, b, loc, x, u):
        nll = -(D.Gamma(a, b).log_prob(x).sum() + D.Beta(a, b).log_prob(u).sum()
                + D.LogNormal(loc, b).log_prob(x).sum() + D.StudentT(a, loc, b).log_prob(x).sum())
        return nll + D.kl_divergence(D.Gamma(a, b), D.Exponential(b)).sum()
    args = [_data(llgrad, 5, positive=True), _data(llgrad, 5, seed=1, positive=True),
            _data(llgrad, 5, seed=2), _data(llgrad, 5, seed=3, positive=True),
            _data(llgrad, 5, seed=4, lo=0.05, hi=0.95)]
    grads = []
    for fn in (loss, llgrad.compile(loss, backend=backend)):
        leaves = [a.detach().requires_grad_() for a in args[:3]]
        out = fn(*leaves, *args[3:])
        out.backward()
        grads.append([float(out.detach())] + [g.grad.numpy() for g in leaves])
    for a, b in zip(*grads):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
    tl = [torch.tensor(a.numpy()).requires_grad_() for a in args[:3]]
    TD = torch.distributions
    want = -(TD.Gamma(tl[0], tl[1]).log_prob(torch.tensor(args[3].numpy())).sum()
             + TD.Beta(tl[0], tl[1]).log_prob(torch.tensor(args[4].numpy())).sum()
             + TD.LogNormal(tl[2], tl[1]).log_prob(torch.tensor(args[3].numpy())).sum()
             + TD.StudentT(tl[0], tl[2], tl[1]).log_prob(torch.tensor(args[3].numpy())).sum()) \
        + TD.kl_divergence(TD.Gamma(tl[0], tl[1]), TD.Exponential(tl[1])).sum()
    want.backward()
    np.testing.assert_allclose(grads[1][0], want.item(), rtol=1e-5)
    for g, t in zip(grads[1][1:], tl):
        np.testing.assert_allclose(g, t.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_compiled_gamma_rsample_step_replays_eager():
    """A reparameterised Gamma draw inside llgrad.compile: the generator's draws and the
    implicit gradient are traced; compiled gives eager's numbers."""
    def step(alpha):
        x = llgrad.distributions.Gamma(alpha, 2.).rsample((64,))
        return (x ** 2).mean()
    results = []
    for fn in (step, llgrad.compile(step)):
        llgrad.manual_seed(3)
        alpha = llgrad.tensor([0.7, 3.]).requires_grad_()
        outs = []
        for _ in range(2):
            out = fn(alpha)
            out.backward()
            outs.append(float(out.detach()))
        results.append((outs, alpha.grad.numpy().copy()))
    np.testing.assert_allclose(results[1][0], results[0][0], rtol=1e-5)
    np.testing.assert_allclose(results[1][1], results[0][1], rtol=1e-4)
    assert not math.isnan(results[0][0][0])
