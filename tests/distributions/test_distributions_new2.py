"""llgrad.distributions against torch.distributions: Multinomial, NegativeBinomial,
ContinuousBernoulli, RelaxedBernoulli, RelaxedOneHotCategorical, LogisticNormal (and the
next ones added): log_prob, moments, entropy, cdf, shapes, expand, gradients, validation
errors, reparameterised gradients and sample statistics."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402

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


def _check(a, b, what):
    if isinstance(a, (tuple, bool, str, int, type(None))):
        assert (tuple(b) if isinstance(a, tuple) else b) == a, what
    else:
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=5e-5,
                                   atol=2e-5, err_msg=what)


def _same(fn):
    want, got = fn(torch), fn(llgrad)
    assert len(want) == len(got)
    for i, (a, b) in enumerate(zip(want, got)):
        _check(a, b, f"item {i}")


def _counts(t):
    return t.tensor([[[1., 2., 2.], [0., 0., 5.]], [[5., 0., 0.], [2., 2., 1.]]])


# name -> (make(t, params), params(t), value(t), what to compare beyond log_prob)
CASES = {
    "Multinomial": (lambda t, p: t.distributions.Multinomial(5, logits=p[0]),
                    lambda t: [_data(t, 2, 3)], _counts, "mean variance entropy"),
    "MultinomialProbs": (lambda t, p: t.distributions.Multinomial(5, p[0].softmax(-1)),
                         lambda t: [_data(t, 2, 3)], _counts, "mean variance entropy"),
    "NegativeBinomial": (lambda t, p: t.distributions.NegativeBinomial(p[0], p[1]),
                         lambda t: [_data(t, 5, positive=True) * 3,
                                    _data(t, 5, seed=1, lo=0.05, hi=0.9)],
                         lambda t: t.tensor([[0., 1., 2., 7., 3.], [4., 0., 1., 1., 9.]]),
                         "mean variance mode"),
    "NegativeBinomialLogits": (lambda t, p: t.distributions.NegativeBinomial(4., logits=p[0]),
                               lambda t: [_data(t, 5)],
                               lambda t: t.tensor([0., 1., 2., 7., 3.]), "mean variance"),
    "ContinuousBernoulli": (lambda t, p: t.distributions.ContinuousBernoulli(p[0]),
                            lambda t: [t.tensor([0.02, 0.3, 0.4995, 0.5, 0.5008, 0.7, 0.99])],
                            lambda t: _data(t, 2, 7, seed=2, lo=0.01, hi=0.99),
                            "mean variance stddev entropy cdf"),
    "ContinuousBernoulliLogits": (lambda t, p: t.distributions.ContinuousBernoulli(logits=p[0]),
                                  lambda t: [_data(t, 3, 4) * 3],
                                  lambda t: _data(t, 3, 4, seed=2, lo=0.01, hi=0.99),
                                  "mean variance entropy cdf"),
    "RelaxedBernoulli": (lambda t, p: t.distributions.RelaxedBernoulli(p[1], logits=p[0]),
                         lambda t: [_data(t, 3, 4), t.tensor(0.7)],
                         lambda t: _data(t, 3, 4, seed=2, lo=0.01, hi=0.99), ""),
    "RelaxedBernoulliProbs": (lambda t, p: t.distributions.RelaxedBernoulli(p[1], p[0]),
                              lambda t: [_data(t, 4, lo=0.1, hi=0.9), t.tensor(2.)],
                              lambda t: _data(t, 3, 4, seed=2, lo=0.01, hi=0.99), ""),
    "RelaxedOneHotCategorical": (
        lambda t, p: t.distributions.RelaxedOneHotCategorical(p[1], logits=p[0]),
        lambda t: [_data(t, 3, 4), t.tensor(0.5)],
        lambda t: t.softmax(_data(t, 2, 3, 4, seed=2) * 2, -1), ""),
    "LogisticNormal": (lambda t, p: t.distributions.LogisticNormal(p[0], p[1]),
                       lambda t: [_data(t, 2, 3), _data(t, 3, seed=1, positive=True)],
                       lambda t: t.softmax(_data(t, 2, 4, seed=2), -1), ""),
    "FisherSnedecor": (lambda t, p: t.distributions.FisherSnedecor(p[0], p[1]),
                       lambda t: [_data(t, 5, positive=True) * 4 + 2,
                                  t.tensor([1., 3., 5., 8., 20.])],
                       lambda t: _data(t, 2, 5, seed=2, positive=True), "mean variance mode"),
    "Kumaraswamy": (lambda t, p: t.distributions.Kumaraswamy(p[0], p[1]),
                    lambda t: [_data(t, 3, 4, positive=True) * 2,
                               _data(t, 3, 4, seed=1, positive=True) * 2],
                    lambda t: _data(t, 3, 4, seed=2, lo=0.05, hi=0.95),
                    "mean variance mode entropy cdf"),
    "InverseGamma": (lambda t, p: t.distributions.InverseGamma(p[0], p[1]),
                     lambda t: [t.tensor([0.5, 1.5, 2.5, 4.]), _data(t, 4, positive=True)],
                     lambda t: _data(t, 2, 4, seed=2, positive=True),
                     "mean variance mode entropy"),
    "GeneralizedPareto": (lambda t, p: t.distributions.GeneralizedPareto(p[0], p[1], p[2]),
                          lambda t: [_data(t, 4) * 0.1, _data(t, 4, seed=1, positive=True) + 1,
                                     t.tensor([0., 0.3, -0.2, 0.7])],
                          lambda t: _data(t, 2, 4, seed=2, lo=0.3, hi=2.),
                          "mean variance mode entropy cdf"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_log_prob_moments_entropy_shapes_and_grads(name):
    make, params, value, what = CASES[name]

    def f(t):
        ps = [p.requires_grad_() for p in params(t)]
        d = make(t, ps)
        v = value(t)
        lp = d.log_prob(v)
        out = [lp, tuple(d.batch_shape), tuple(d.event_shape), d.has_rsample,
               tuple(d.sample((2,)).shape), repr(d.support).split("(")[0]]
        total = lp.sum()
        for attr in what.split():
            r = getattr(d, attr)
            r = r(v) if attr == "cdf" else r() if attr == "entropy" else r
            out.append(r)
            if r.requires_grad:
                total = total + r.sum()
        total.backward()
        out += [p.grad for p in ps]
        e = d.expand((2,) + tuple(d.batch_shape))
        v1 = v.reshape((-1,) + tuple(d.batch_shape) + tuple(d.event_shape))[:1]
        out += [tuple(e.batch_shape), e.log_prob(v1), type(e).__name__]
        if d.has_rsample:
            out.append(tuple(d.rsample((3,)).shape))
        return out
    _same(f)


def test_continuous_bernoulli_icdf_and_rsample_gradient():
    def f(t):
        p = t.tensor([0.02, 0.3, 0.4995, 0.7, 0.99]).requires_grad_()
        d = t.distributions.ContinuousBernoulli(p)
        u = t.tensor([0.1, 0.5, 0.3, 0.9, 0.6])
        x = d.icdf(u)
        x.sum().backward()
        return [x, p.grad, d.cdf(x.detach())]
    _same(f)
    llgrad.manual_seed(0)
    p = llgrad.tensor([0.2, 0.8]).requires_grad_()
    llgrad.distributions.ContinuousBernoulli(p).rsample((5,)).sum().backward()
    assert p.grad is not None and np.isfinite(p.grad.numpy()).all()


def test_relaxed_rsample_is_torchs_formula_on_the_same_uniforms():
    """The Gumbel-sigmoid / Gumbel-softmax draws: rsample with llgrad's uniforms equals
    torch's formula on those uniforms, and so do the parameter gradients."""
    D, T = llgrad.distributions, torch.distributions
    for cls, shape in (("RelaxedBernoulli", (4, 2, 3)), ("RelaxedOneHotCategorical", (4, 2, 3))):
        llgrad.manual_seed(5)
        logits = _data(llgrad, 2, 3).requires_grad_()
        x = getattr(D, cls)(llgrad.tensor(0.6), logits=logits).rsample((4,))
        x.sum().backward()
        llgrad.manual_seed(5)
        u = torch.tensor(llgrad.rand(shape).numpy()).clamp(1.1920929e-07, 1 - 1.1920929e-07)
        tl = torch.tensor(logits.detach().numpy()).requires_grad_()
        d = getattr(T, cls)(torch.tensor(0.6), logits=tl)
        if cls == "RelaxedBernoulli":
            p = d.probs.clamp(1.1920929e-07, 1 - 1.1920929e-07)
            y = torch.sigmoid((u.log() - (-u).log1p() + p.log() - (-p).log1p()) / 0.6)
        else:
            y = torch.softmax((tl - (-u.log()).log()) / 0.6, -1)
        y.sum().backward()
        np.testing.assert_allclose(x.detach().numpy(), y.detach().numpy(), rtol=1e-4,
                                   atol=1e-6)
        np.testing.assert_allclose(logits.grad.numpy(), tl.grad.numpy(), rtol=1e-3, atol=1e-5)


def test_logistic_normal_through_the_same_base_noise():
    llgrad.manual_seed(0)
    loc = _data(llgrad, 2, 3).requires_grad_()
    scale = _data(llgrad, 3, seed=1, positive=True).requires_grad_()
    d = llgrad.distributions.LogisticNormal(loc, scale)
    tl, ts = (torch.tensor(a.detach().numpy()).requires_grad_() for a in (loc, scale))
    td = torch.distributions.LogisticNormal(tl, ts)
    eps = llgrad.randn(5, 2, 3)
    x = d.transforms[0](loc + scale * eps)
    y = td.transforms[0](tl + ts * torch.tensor(eps.numpy()))
    (x ** 2).sum().backward()
    (y ** 2).sum().backward()
    np.testing.assert_allclose(x.detach().numpy(), y.detach().numpy(), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(loc.grad.numpy(), tl.grad.numpy(), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(scale.grad.numpy(), ts.grad.numpy(), rtol=1e-4, atol=1e-6)
    assert tuple(d.rsample((5,)).shape) == (5, 2, 4)


def test_kumaraswamy_and_generalized_pareto_rsample_on_the_same_uniforms():
    """Both push a uniform draw through torch's maps: the same values and gradients."""
    u = llgrad.rand(6, 4) * 0.98 + 0.01
    cases = [(lambda t, p: t.distributions.Kumaraswamy(p[0], p[1]),
              [_data(llgrad, 4, positive=True) * 2, _data(llgrad, 4, seed=1, positive=True)]),
             (lambda t, p: t.distributions.GeneralizedPareto(p[0], p[1], p[2]),
              [_data(llgrad, 4), _data(llgrad, 4, seed=1, positive=True),
               llgrad.tensor([0., 0.3, -0.2, 0.7])])]
    for make, params in cases:
        pl = [p.requires_grad_() for p in params]
        pt = [torch.tensor(p.detach().numpy()).requires_grad_() for p in pl]
        dl, dt = make(llgrad, pl), make(torch, pt)
        if hasattr(dl, "transforms"):
            xl, xt = u, torch.tensor(u.numpy())
            for a, b in zip(dl.transforms, dt.transforms):
                xl, xt = a(xl), b(xt)
        else:
            xl, xt = dl.icdf(u), dt.icdf(torch.tensor(u.numpy()))
        (xl ** 2).sum().backward()
        (xt ** 2).sum().backward()
        np.testing.assert_allclose(xl.detach().numpy(), xt.detach().numpy(), rtol=1e-4)
        for a, b in zip(pl, pt):
            if b.grad is not None:
                np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-3,
                                           atol=1e-5)


def test_gamma_based_rsample_gradients():
    """FisherSnedecor and InverseGamma draws carry finite gradients; InverseGamma's
    d x / d rate is x / rate (x = rate / G)."""
    llgrad.manual_seed(4)
    D = llgrad.distributions
    df1, df2 = llgrad.tensor([3., 8.]).requires_grad_(), llgrad.tensor([5., 9.]).requires_grad_()
    D.FisherSnedecor(df1, df2).rsample((7,)).log().sum().backward()
    for g in (df1.grad, df2.grad):
        assert g is not None and np.isfinite(g.numpy()).all()
    conc, rate = llgrad.tensor([2., 4.]).requires_grad_(), llgrad.tensor([1.5, 3.]).requires_grad_()
    x = D.InverseGamma(conc, rate).rsample((7,))
    x.sum().backward()
    np.testing.assert_allclose(rate.grad.numpy(), (x.detach() / rate.detach()).sum(0).numpy(),
                               rtol=1e-5)
    assert np.isfinite(conc.grad.numpy()).all()


@pytest.mark.parametrize("bad", [
    lambda D, t: D.Multinomial(3, t.tensor([-0.2, 1.2])),
    lambda D, t: D.NegativeBinomial(t.tensor([-1.]), t.tensor([0.5])),
    lambda D, t: D.NegativeBinomial(t.tensor([1.]), t.tensor([1.0])),
    lambda D, t: D.ContinuousBernoulli(t.tensor([1.5]), validate_args=True),
    lambda D, t: D.RelaxedBernoulli(t.tensor(1.), t.tensor([1.5])),
    lambda D, t: D.RelaxedOneHotCategorical(t.tensor(1.), t.tensor([-0.5, 1.5])),
    lambda D, t: D.LogisticNormal(t.zeros(2), t.tensor([1., -1.])),
    lambda D, t: D.FisherSnedecor(t.tensor([1.]), t.tensor([-1.])),
    lambda D, t: D.Kumaraswamy(t.tensor([0.]), t.tensor([1.])),
    lambda D, t: D.InverseGamma(t.tensor([1.]), t.tensor([-1.])),
    lambda D, t: D.GeneralizedPareto(0., t.tensor([-1.]), 0.5),
])
def test_invalid_parameters_raise_as_torch(bad):
    with pytest.raises(ValueError) as want:
        bad(torch.distributions, torch)
    with pytest.raises(ValueError) as got:
        bad(llgrad.distributions, llgrad)
    assert str(got.value).startswith(str(want.value).split("(")[0])


def test_kumaraswamy_and_generalized_pareto_rsample_on_the_same_uniforms():
    """Both push a uniform draw through torch's maps: the same values and gradients."""
    u = llgrad.rand(6, 4) * 0.98 + 0.01
    cases = [(lambda t, p: t.distributions.Kumaraswamy(p[0], p[1]),
              [_data(llgrad, 4, positive=True) * 2, _data(llgrad, 4, seed=1, positive=True)]),
             (lambda t, p: t.distributions.GeneralizedPareto(p[0], p[1], p[2]),
              [_data(llgrad, 4), _data(llgrad, 4, seed=1, positive=True),
               llgrad.tensor([0., 0.3, -0.2, 0.7])])]
    for make, params in cases:
        pl = [p.requires_grad_() for p in params]
        pt = [torch.tensor(p.detach().numpy()).requires_grad_() for p in pl]
        dl, dt = make(llgrad, pl), make(torch, pt)
        if hasattr(dl, "transforms"):
            xl, xt = u, torch.tensor(u.numpy())
            for a, b in zip(dl.transforms, dt.transforms):
                xl, xt = a(xl), b(xt)
        else:
            xl, xt = dl.icdf(u), dt.icdf(torch.tensor(u.numpy()))
        (xl ** 2).sum().backward()
        (xt ** 2).sum().backward()
        np.testing.assert_allclose(xl.detach().numpy(), xt.detach().numpy(), rtol=1e-4)
        for a, b in zip(pl, pt):
            if b.grad is not None:
                np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-3,
                                           atol=1e-5)


def test_gamma_based_rsample_gradients():
    """FisherSnedecor and InverseGamma draws carry finite gradients; InverseGamma's
    d x / d rate is x / rate (x = rate / G)."""
    llgrad.manual_seed(4)
    D = llgrad.distributions
    df1, df2 = llgrad.tensor([3., 8.]).requires_grad_(), llgrad.tensor([5., 9.]).requires_grad_()
    D.FisherSnedecor(df1, df2).rsample((7,)).log().sum().backward()
    for g in (df1.grad, df2.grad):
        assert g is not None and np.isfinite(g.numpy()).all()
    conc, rate = llgrad.tensor([2., 4.]).requires_grad_(), llgrad.tensor([1.5, 3.]).requires_grad_()
    x = D.InverseGamma(conc, rate).rsample((7,))
    x.sum().backward()
    np.testing.assert_allclose(rate.grad.numpy(), (x.detach() / rate.detach()).sum(0).numpy(),
                               rtol=1e-5)
    assert np.isfinite(conc.grad.numpy()).all()


@pytest.mark.parametrize("bad", [
    lambda D, t: D.Multinomial(3, t.tensor([0.2, 0.8])).log_prob(t.tensor([3., 1.])),
    lambda D, t: D.NegativeBinomial(t.tensor(3.), t.tensor(0.5)).log_prob(t.tensor(1.5)),
    lambda D, t: D.ContinuousBernoulli(t.tensor(0.3)).log_prob(t.tensor(1.5)),
    lambda D, t: D.RelaxedBernoulli(t.tensor(1.), t.tensor(0.3)).log_prob(t.tensor(1.5)),
    lambda D, t: D.LogisticNormal(t.zeros(2), t.ones(2)).log_prob(t.tensor([0.5, 0.6, 0.2])),
    lambda D, t: D.FisherSnedecor(t.tensor(2.), t.tensor(3.)).log_prob(t.tensor(-1.)),
    lambda D, t: D.Kumaraswamy(t.tensor(2.), t.tensor(3.)).log_prob(t.tensor(1.5)),
    lambda D, t: D.InverseGamma(t.tensor(2.), t.tensor(3.)).log_prob(t.tensor(-1.)),
    lambda D, t: D.GeneralizedPareto(0., 1., t.tensor(-0.5)).log_prob(t.tensor(2.5)),
])
def test_values_outside_the_support_raise_as_torch(bad):
    with pytest.raises(ValueError, match="to be within the support"):
        bad(torch.distributions, torch)
    with pytest.raises(ValueError, match="to be within the support"):
        bad(llgrad.distributions, llgrad)


def test_sample_statistics():
    llgrad.manual_seed(0)
    D, n = llgrad.distributions, 8000
    cases = [D.Multinomial(7, llgrad.tensor([0.2, 0.5, 0.3])),
             D.NegativeBinomial(llgrad.tensor([2., 10.]), llgrad.tensor([0.3, 0.7])),
             D.ContinuousBernoulli(llgrad.tensor([0.1, 0.5, 0.8])),
             D.FisherSnedecor(llgrad.tensor([5., 12.]), llgrad.tensor([30., 40.])),
             D.Kumaraswamy(llgrad.tensor([0.5, 3.]), llgrad.tensor([2., 1.5])),
             D.InverseGamma(llgrad.tensor([6., 9.]), llgrad.tensor([1., 3.])),
             D.GeneralizedPareto(llgrad.tensor([0., 1.]), 2., llgrad.tensor([-0.3, 0.1]))]
    for d in cases:
        s = d.sample((n,))
        assert bool(d.support.check(s).all()), d
        se = (d.variance / n).sqrt()
        assert bool(((s.mean(0) - d.mean).abs() < 5 * se).all()), d
        np.testing.assert_allclose(s.var(0).numpy(), d.variance.numpy(), rtol=0.15,
                                   err_msg=repr(d))
    m = D.Multinomial(7, llgrad.tensor([0.2, 0.5, 0.3])).sample((10,))
    assert bool((m.sum(-1) == 7).all())
    s = D.RelaxedOneHotCategorical(llgrad.tensor(0.1), llgrad.tensor([0.2, 0.5, 0.3])).sample((n,))
    np.testing.assert_allclose(s.sum(-1).numpy(), 1, rtol=1e-5)
    hits = llgrad.nn.functional.one_hot(s.argmax(-1), 3).float().mean(0)
    np.testing.assert_allclose(hits.numpy(), [0.2, 0.5, 0.3], atol=0.02)
    b = D.RelaxedBernoulli(llgrad.tensor(0.05), llgrad.tensor([0.25, 0.8])).sample((n,))
    np.testing.assert_allclose((b > 0.5).float().mean(0).numpy(), [0.25, 0.8], atol=0.02)


@pytest.mark.parametrize("backend", ["llvm", "interpret"])
def test_compiled_loss_equals_eager_and_torch(backend):
    """A loss over the new distributions' log_probs and a KL under llgrad.compile: eager's
    value and gradients, which are torch's."""
    def loss(lib, a, b, loc, x, u):
        D = lib.distributions
        nll = -(D.Gumbel(loc, b).log_prob(x).sum() + D.Weibull(b, a).log_prob(x).sum()
                + D.Kumaraswamy(a, b).log_prob(u).sum()
                + D.ContinuousBernoulli(logits=loc).log_prob(u).sum()
                + D.HalfNormal(b).log_prob(x).sum() + D.Cauchy(loc, a).log_prob(x).sum()
                + D.LowRankMultivariateNormal(loc, a.unsqueeze(-1), b).log_prob(x).sum()
                + D.VonMises(loc, a).log_prob(x).sum() + D.FisherSnedecor(a, b).log_prob(x).sum())
        return nll + D.kl_divergence(D.Gumbel(loc, a), D.Normal(loc, b)).sum()
    args = [_data(llgrad, 5, positive=True), _data(llgrad, 5, seed=1, positive=True),
            _data(llgrad, 5, seed=2), _data(llgrad, 5, seed=3, positive=True),
            _data(llgrad, 5, seed=4, lo=0.05, hi=0.95)]
    results = []
    for lib, fn in ((torch, loss), (llgrad, loss),
                    (llgrad, llgrad.compile(lambda *a: loss(llgrad, *a), backend=backend))):
        leaves = [lib.tensor(a.numpy()).requires_grad_() for a in args[:3]]
        rest = [lib.tensor(a.numpy()) for a in args[3:]]
        out = fn(lib, *leaves, *rest) if fn is loss else fn(*leaves, *rest)
        out.backward()
        results.append([out.detach().numpy()] + [g.grad.numpy() for g in leaves])
    for got in results[1:]:
        for a, b in zip(results[0], got):
            np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5)
