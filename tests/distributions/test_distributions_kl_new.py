"""kl_divergence against torch's for the pairs PyTorch registers with Cauchy,
ContinuousBernoulli, Gumbel, HalfNormal, LowRankMultivariateNormal and Pareto (values,
infinities where q misses p's support, gradients), and the torch module names."""
import importlib

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402

torch.broadcast_shapes((1,), ())    # (its first call imports torch._refs: ~1 s, at collection)


def _data(lib, *shape, seed=0, lo=None, hi=None, positive=False):
    rng = np.random.default_rng(seed + 13 * len(shape) + sum(shape))
    a = rng.uniform(lo, hi, shape) if lo is not None else rng.standard_normal(shape)
    a = np.abs(a) + 0.3 if positive else a
    return lib.tensor(a.astype(np.float32))


def _pairs(t, ps):
    D = t.distributions
    a, b, c, loc, pr, lo = ps
    beta, gamma, expo = D.Beta(a, b), D.Gamma(c, b), D.Exponential(a)
    normal, lap = D.Normal(loc, a), D.Laplace(loc, c)
    unif = D.Uniform(lo, lo + a)
    unif01 = D.Uniform(lo * 0.2 + 0.1, lo * 0.2 + 0.5)
    cb, cb2 = D.ContinuousBernoulli(pr), D.ContinuousBernoulli(logits=loc)
    gum, gum2 = D.Gumbel(loc, a), D.Gumbel(loc * 0.5, b)
    par, par2 = D.Pareto(a, b * 3), D.Pareto(c, a + 2.5)
    W, W2 = t.stack([a, b], -1).unsqueeze(0) * 0.3, t.stack([c, loc], -1).unsqueeze(0) * 0.2
    low = D.LowRankMultivariateNormal(loc.unsqueeze(0) * 0 + loc[:1], W.expand(2, 4, 2), a + 0.5)
    low2 = D.LowRankMultivariateNormal(loc, W2[0], b + 0.2)
    mvn = D.MultivariateNormal(loc * 0.5, scale_tril=t.eye(4) * 1.5 + t.ones(4, 4).tril(-1) * 0.2)
    return [(D.Cauchy(loc, a), D.Cauchy(loc * 2, c)), (cb, cb2), (gum, gum2),
            (D.HalfNormal(a), D.HalfNormal(c)), (low, low2), (low, mvn), (mvn, low2),
            (par, par2), (beta, cb), (beta, par), (cb, par), (cb, expo), (cb, normal),
            (cb, unif), (cb, unif01), (expo, par), (expo, cb), (expo, gum), (gamma, par),
            (gamma, cb), (gamma, gum), (gum, unif), (gum, par), (gum, gamma), (gum, expo),
            (gum, cb), (gum, beta), (gum, normal), (lap, par), (lap, cb), (normal, par),
            (normal, cb), (normal, gum), (par, unif), (par, cb), (par, beta),
            (par, expo), (par, gamma), (par, normal), (unif01, cb), (unif, gum), (unif, par),
            (D.Uniform(a + 3, a + 4), par), (cb, D.Uniform(lo - 2.5, lo + 1.5))]


def _params(t):
    return [_data(t, 4, positive=True), _data(t, 4, seed=1, positive=True),
            _data(t, 4, seed=2, positive=True), _data(t, 4, seed=3),
            _data(t, 4, seed=4, lo=0.1, hi=0.9), _data(t, 4, seed=5, lo=0.1, hi=2.)]


def test_kl_divergence_of_registered_pairs_and_gradients():
    results = {}
    for lib in (torch, llgrad):
        ps = [p.requires_grad_() for p in _params(lib)]
        kls = [lib.distributions.kl_divergence(p, q) for p, q in _pairs(lib, ps)]
        total = sum(k[k.isfinite()].sum() for k in kls)
        total.backward()
        results[lib] = kls + [p.grad for p in ps]
    for i, (a, b) in enumerate(zip(results[torch], results[llgrad])):
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-4,
                                   atol=1e-5, err_msg=f"item {i}")


def test_kl_errors_as_torch():
    for lib in (torch, llgrad):
        D = lib.distributions
        a = D.LowRankMultivariateNormal(lib.zeros(3), lib.ones(3, 1), lib.ones(3))
        b = D.LowRankMultivariateNormal(lib.zeros(2), lib.ones(2, 1), lib.ones(2))
        with pytest.raises(ValueError, match="different event shapes"):
            D.kl_divergence(a, b)
        with pytest.raises(NotImplementedError):
            D.kl_divergence(D.VonMises(lib.zeros(2), lib.ones(2)),
                            D.VonMises(lib.zeros(2), lib.ones(2)))


@pytest.mark.parametrize("module", ["half_normal", "cauchy", "half_cauchy", "gumbel", "weibull",
                                    "pareto", "multinomial", "negative_binomial",
                                    "continuous_bernoulli", "relaxed_bernoulli",
                                    "relaxed_categorical", "logistic_normal",
                                    "lowrank_multivariate_normal", "von_mises",
                                    "fishersnedecor", "kumaraswamy", "inverse_gamma",
                                    "generalized_pareto", "chi2", "exp_family",
                                    "constraint_registry"])
def test_torch_module_names(module):
    want = importlib.import_module(f"torch.distributions.{module}")
    got = importlib.import_module(f"llgrad.distributions.{module}")
    names = [n for n in want.__all__]
    assert names and all(hasattr(got, n) for n in names), module
