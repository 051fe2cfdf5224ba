"""Session 74 (n), torch.distributions against PyTorch, part 2: the discrete families
(Categorical by probs and logits with zero probabilities and -inf logits, OneHotCategorical,
Bernoulli, Binomial, Poisson, Geometric, Multinomial), kl_divergence pairs (a VAE's KL and a
policy gradient's log_prob compiled), expand(), draws under torch.manual_seed (every family
here reproduces torch's exact samples, eagerly and in a compiled step), rsample gradients,
validate_args errors with PyTorch's ValueError text, set_default_validate_args and
constraints: torch, llgrad eager and llgrad.compile (adversarial_harness_s69_a10.check)."""
import warnings

import numpy as np
import pytest

pytest.importorskip("torch")
from adversarial_harness_s69_a10 import check  # noqa: E402

pytestmark = pytest.mark.torch
F32 = np.float32


def r(seed, *shape, scale=1.0):
    return (np.random.RandomState(seed).randn(*shape) * scale).astype(F32)


def G(a):
    return ("grad", a)


def categorical(torch, lg, v):
    D = torch.distributions
    a, b = D.Categorical(logits=lg), D.Categorical(probs=lg.softmax(-1))
    u = D.Categorical(probs=lg.abs() + 0.1)             # (unnormalised)
    return (a.log_prob(v), b.log_prob(v), a.entropy(), b.entropy(), a.probs, b.logits,
            a.mode, tuple(a.batch_shape), a.param_shape, a.mean, a.variance,
            a.log_prob(v.reshape(2, 1, 1)), u.probs, u.logits, u.entropy())


def categorical_degenerate(torch, p, lg):
    D = torch.distributions
    z = D.Categorical(probs=p)
    m = torch.tensor([[0., float("-inf"), 0.], [float("-inf"), 0., 0.], [0., 0., 0.]])
    n = D.Categorical(logits=lg + m)
    return (z.log_prob(torch.tensor([0, 1, 2])), z.entropy(), z.logits, n.entropy(),
            n.log_prob(torch.tensor([1, 0, 2])), n.probs)


def onehot_and_enumerate(torch, lg, v):
    D = torch.distributions
    d = D.OneHotCategorical(logits=lg)
    c, b = D.Categorical(logits=lg), D.Bernoulli(logits=lg[..., 0])
    return (d.log_prob(torch.nn.functional.one_hot(v, 4).float()), d.entropy(), d.mean, d.mode,
            d.variance, tuple(d.event_shape), d.enumerate_support().shape,
            c.enumerate_support(), c.enumerate_support(expand=False), b.enumerate_support())


def bernoulli(torch, lg, x):
    D = torch.distributions
    d, big = D.Bernoulli(logits=lg), D.Bernoulli(logits=lg * 100)
    e = D.Bernoulli(probs=torch.tensor([0.0, 1.0, 0.5, 0.3, 0.9]))
    return (d.log_prob(x), d.entropy(), d.probs, d.mean, d.mode, d.variance, big.log_prob(x),
            big.entropy(), e.log_prob(x), e.entropy(), e.logits, e.mode)


def binomial(torch, lg):
    D = torch.distributions
    d = D.Binomial(total_count=torch.tensor([5., 10., 3.]), logits=lg)
    i = D.Binomial(torch.tensor([3, 5, 2]), logits=lg * 50)
    e = D.Binomial(torch.tensor([0., 5., 5., 3.]), probs=torch.tensor([0.3, 0., 1., 0.5]))
    return (d.log_prob(torch.tensor([2., 10., 0.])), d.mean, d.mode, d.variance, d.entropy(),
            i.log_prob(torch.tensor([1., 5., 0.])), i.probs,
            e.log_prob(torch.tensor([0., 0., 5., 3.])), e.mean, e.variance, e.mode,
            D.Binomial(4, probs=torch.sigmoid(lg)).enumerate_support().shape)


def poisson_geometric_multinomial(torch, lr, lg):
    D = torch.distributions
    p = D.Poisson(lr.exp())
    z = D.Poisson(torch.tensor([0., 1., 0., 2.]), validate_args=False)
    g, gp = D.Geometric(logits=lr), D.Geometric(probs=torch.tensor([1.0, 0.5, 1e-3, 0.2]))
    k = torch.tensor([0., 1., 3., 7.])
    m = D.Multinomial(6, logits=lg)
    return (p.log_prob(k), p.mean, p.mode, p.variance, z.log_prob(torch.tensor([0., 0., 2., 1.])),
            g.log_prob(k), g.entropy(), g.mean, g.mode, g.variance, gp.log_prob(k), gp.entropy(),
            m.log_prob(torch.tensor([[1., 2., 3.], [0., 0., 6.]])), m.mean, m.variance)


def kl_pairs(torch, a, b):
    D = torch.distributions
    kl = D.kl_divergence
    return (kl(D.Normal(a, b.exp()), D.Normal(b, a.exp())),
            kl(D.Categorical(logits=a), D.Categorical(logits=b)),
            kl(D.OneHotCategorical(logits=a), D.OneHotCategorical(logits=b)),
            kl(D.Bernoulli(logits=a), D.Bernoulli(logits=b)),
            kl(D.Beta(a.exp(), b.exp()), D.Beta(b.exp(), a.exp())),
            kl(D.Independent(D.Normal(a, 1.0), 1), D.Independent(D.Normal(b, 2.0), 1)),
            kl(D.Gamma(a.exp(), b.exp()), D.Gamma(b.exp(), 1.0)),
            kl(D.Dirichlet(a.exp()), D.Dirichlet(b.exp())),
            kl(D.Exponential(a.exp()), D.Gamma(b.exp(), 1.0)),
            kl(D.Laplace(a, b.exp()), D.Laplace(b, a.exp())),
            kl(D.Poisson(a.exp()), D.Poisson(b.exp())),
            kl(D.Geometric(logits=a), D.Geometric(logits=b)),
            kl(D.Binomial(5, logits=a), D.Binomial(5, logits=b)),
            kl(D.Normal(a, 1.0), D.Laplace(b, 2.0)), kl(D.Uniform(a, a + 1), D.Normal(b, 1.0)),
            kl(D.Normal(a, 1.0), D.Uniform(b, b + 1)),
            kl(D.Uniform(a - 1, a + 1), D.Uniform(a, a + 3)),
            kl(D.LogNormal(a, 1.0), D.LogNormal(b, 2.0)))


def kl_mvn(torch, l1, l2, a):
    D = torch.distributions
    L1, L2 = torch.tril(a) + 3 * torch.eye(3), torch.tril(a.mT) + 3 * torch.eye(3)
    p = D.MultivariateNormal(l1, scale_tril=L1)
    q = D.MultivariateNormal(l2, covariance_matrix=L2 @ L2.mT)
    lr = D.LowRankMultivariateNormal(l1, a[..., :2], torch.ones(3))
    return D.kl_divergence(p, q), D.kl_divergence(q, p), D.kl_divergence(lr, p)


def kl_errors(torch, a):
    D = torch.distributions
    return D.kl_divergence(D.Independent(D.Normal(a, 1.0), 1), D.Normal(a, 1.0))


def vae_loss(torch, mu, logvar, x):
    D = torch.distributions
    q = D.Normal(mu, (0.5 * logvar).exp())
    kl = D.kl_divergence(q, D.Normal(torch.zeros_like(mu), torch.ones_like(mu))).sum(-1).mean()
    return kl - D.Bernoulli(logits=mu @ mu.mT).log_prob(x).sum()


def policy_gradient_loss(torch, lg, act, adv):
    d = torch.distributions.Categorical(logits=lg)
    return -(d.log_prob(act) * adv).mean() - 0.01 * d.entropy().mean()


def expand_shapes(torch, loc, sc):
    D = torch.distributions
    n = D.Normal(loc, sc.exp()).expand([4, 3])
    c = D.Categorical(logits=loc).expand([5])
    i = D.Independent(D.Normal(loc, 1.0), 1).expand([2])
    dr = D.Dirichlet(sc.exp()).expand([2])
    lr = D.LowRankMultivariateNormal(loc, torch.ones(3, 1), torch.ones(3)).expand([2])
    mx = D.MixtureSameFamily(D.Categorical(logits=loc), D.Normal(loc, 1.0)).expand([4])
    return (n.log_prob(torch.zeros(4, 3)), tuple(n.batch_shape),
            c.log_prob(torch.tensor([0, 1, 2, 0, 1])), tuple(c.batch_shape),
            i.log_prob(torch.zeros(2, 3)), dr.log_prob(torch.ones(2, 3) / 3),
            lr.log_prob(torch.zeros(2, 3)), mx.log_prob(torch.zeros(4)), tuple(mx.batch_shape),
            D.MultivariateNormal(loc, torch.eye(3)).expand([2]).log_prob(torch.zeros(2, 3)))


def draws(torch, loc, ls, lg):
    """Values under manual_seed: torch's own streams."""
    D = torch.distributions
    torch.manual_seed(3)
    L = torch.tensor([[1., 0, 0], [0.5, 2, 0], [-1, 0.3, 0.5]])
    out = [D.Normal(loc, ls.exp()).rsample((2,)), D.MultivariateNormal(loc, scale_tril=L).rsample(),
           D.LowRankMultivariateNormal(loc, L[:, :2], ls.exp()).rsample(),
           D.Categorical(logits=lg).sample((4,)), D.Bernoulli(logits=lg).sample(),
           D.OneHotCategorical(logits=lg).sample(), D.Geometric(logits=loc).sample(),
           D.Exponential(ls.exp()).rsample(), D.Laplace(loc, ls.exp()).rsample(),
           D.Uniform(loc, loc + ls.exp()).rsample(), D.Cauchy(loc, 1.0).sample(),
           D.LogNormal(loc, 0.5).rsample(), D.Gamma(ls.exp(), 1.0).rsample(),
           D.Gamma(ls.exp() * 0.1, 1.0).rsample(), D.Beta(ls.exp(), 2.0).rsample(),
           D.Dirichlet(ls.exp() * 0.2).rsample((2,)), D.StudentT(3.0, loc, 1.0).sample(),
           D.Poisson(ls.exp() * 3).sample((2,)), D.Binomial(10, logits=loc).sample(),
           D.MixtureSameFamily(D.Categorical(logits=loc), D.Normal(torch.arange(3.) * 5, 0.1)).sample((4,))]
    T = D.transforms
    d = D.TransformedDistribution(D.Normal(loc * 0 + 12.0, 0.01), [T.TanhTransform(cache_size=1)])
    a = d.rsample()                         # (saturated: log_prob through the cache)
    return out + [a, d.log_prob(a)]


def sample_shapes(torch, loc):
    D = torch.distributions
    n = D.Normal(loc, 1.0)
    c = D.Categorical(logits=torch.zeros(2, 4))
    return (tuple(n.sample().shape), tuple(n.sample((5,)).shape), tuple(n.rsample((2, 1)).shape),
            tuple(n.sample(5).shape), tuple(D.MultivariateNormal(torch.zeros(2, 3), torch.eye(3)).sample((4,)).shape),
            tuple(c.sample((3,)).shape), str(c.sample().dtype).split(".")[-1],
            str(D.OneHotCategorical(logits=torch.zeros(4)).sample().dtype).split(".")[-1],
            tuple(D.Dirichlet(torch.ones(2, 3)).rsample((5,)).shape),
            [str(t.dtype).split(".")[-1] for t in (D.Normal(loc.double(), 1.0).sample(),
                                                  D.Gamma(loc.double().exp(), 2.0).rsample())])


def support_checks(torch, x):
    C, D = torch.distributions.constraints, torch.distributions
    return (C.positive.check(x), C.unit_interval.check(x), C.simplex.check(x.softmax(-1)),
            C.simplex.check(x), C.integer_interval(0, 3).check(x.round()), C.real_vector.check(x),
            C.boolean.check(x), C.lower_cholesky.check(torch.tril(x[:3, :3]) + torch.eye(3)),
            C.positive_definite.check(torch.eye(3) * x[0, 0]), C.interval(-1, 1).check(x),
            C.half_open_interval(0, 1).check(x), C.greater_than(0.2).check(x),
            D.Normal(0., 1.).support.check(x), D.Dirichlet(torch.ones(3)).support.check(x.softmax(-1)),
            C.nonnegative_integer.check(x.abs().round()), C.corr_cholesky.check(torch.eye(3)),
            C.one_hot.check(x), C.positive.event_dim, C.simplex.event_dim,
            C.nonnegative_integer.is_discrete, C.independent(C.real, 1).event_dim,
            D.Categorical(torch.ones(3)).support.upper_bound, D.Bernoulli.has_enumerate_support,
            D.Gamma.has_rsample, D.Poisson.has_rsample, repr(C.positive), repr(C.interval(0, 1)),
            repr(D.Beta.arg_constraints["concentration1"]))


def default_validate_off(torch, x):
    D = torch.distributions
    D.Distribution.set_default_validate_args(False)
    try:
        return (D.Normal(torch.zeros(3), torch.tensor([1.0, -1.0, 2.0])).log_prob(x),
                D.Bernoulli(0.3).log_prob(torch.tensor(0.5)),
                D.Uniform(torch.zeros(3), torch.ones(3)).log_prob(x))
    finally:
        D.Distribution.set_default_validate_args(True)


SWEEP = [
    (categorical, [G(r(1, 2, 4)), np.array([0, 3])], None),
    (categorical_degenerate, [G(np.array([[0.5, 0., 0.5]] * 3, F32)), G(r(1, 3, 3))], None),
    (onehot_and_enumerate, [G(r(1, 3, 4)), np.array([0, 3, 1])], None),
    (bernoulli, [G(r(1, 5)), np.array([0, 1, 1, 0, 1], F32)], None),
    (binomial, [G(r(1, 3))], None),
    (poisson_geometric_multinomial, [G(r(1, 4)), G(r(2, 2, 3))], None),
    (kl_pairs, [G(r(1, 3)), G(r(2, 3))], None),
    (kl_mvn, [G(r(1, 3)), G(r(2, 3)), G(r(3, 3, 3))], None),
    (kl_errors, [r(1, 3)], None),
    (vae_loss, [G(r(1, 4, 3)), G(r(2, 4, 3)), (np.random.RandomState(0).rand(4, 4) > 0.5).astype(F32)], None),
    (policy_gradient_loss, [G(r(1, 6, 3)), np.array([0, 2, 1, 1, 0, 2]), r(2, 6)], None),
    (expand_shapes, [G(r(1, 3)), G(r(2, 3))], None),
    (draws, [G(r(1, 3)), G(r(2, 3, scale=0.5)), G(r(3, 2, 3))], "manual_seed"),
    (sample_shapes, [r(1, 3)], None),
    (support_checks, [r(1, 4, 3)], None),
    (default_validate_off, [np.array([-0.5, 0.5, 1.5], F32)], None),
]


@pytest.mark.slow
@pytest.mark.parametrize("fn,specs,warns", SWEEP, ids=[c[0].__name__ for c in SWEEP])
def test_discrete_kl_draws_sweep(fn, specs, warns):
    check(fn, *specs, rtol=2e-5, atol=1e-5, compiled_warns=warns)


BAD = {
    "normal_scale": lambda t: t.distributions.Normal(t.zeros(2), t.tensor([1.0, -1.0]), validate_args=True),
    "categorical_probs": lambda t: t.distributions.Categorical(probs=t.tensor([0.5, -0.1]), validate_args=True),
    "categorical_neither": lambda t: t.distributions.Categorical(),
    "categorical_out_of_support": lambda t: t.distributions.Categorical(
        logits=t.zeros(2, 4), validate_args=True).log_prob(t.tensor([4, 0])),
    "categorical_fraction": lambda t: t.distributions.Categorical(
        logits=t.zeros(2, 4), validate_args=True).log_prob(t.tensor([1.5, 0.0])),
    "categorical_value_shape": lambda t: t.distributions.Categorical(
        logits=t.zeros(2, 4)).log_prob(t.tensor([0, 1, 2])),
    "bernoulli_value": lambda t: t.distributions.Bernoulli(
        probs=t.tensor([0.3]), validate_args=True).log_prob(t.tensor([0.5])),
    "beta_value": lambda t: t.distributions.Beta(t.ones(2), t.ones(2)).log_prob(t.tensor([1.5, 0.5])),
    "mvn_covariance": lambda t: t.distributions.MultivariateNormal(
        t.zeros(2), covariance_matrix=t.tensor([[1., 2.], [2., 1.]]), validate_args=True),
    "mvn_two_parameters": lambda t: t.distributions.MultivariateNormal(
        t.zeros(2), covariance_matrix=t.eye(2), scale_tril=t.eye(2)),
    "mvn_scalar_loc": lambda t: t.distributions.MultivariateNormal(t.tensor(0.), t.eye(2)),
    "dirichlet_value": lambda t: t.distributions.Dirichlet(t.ones(3)).log_prob(t.tensor([0.2, 0.2, 0.2])),
    "poisson_value": lambda t: t.distributions.Poisson(t.ones(2)).log_prob(t.tensor([1.5, -1.0])),
    "uniform_order": lambda t: t.distributions.Uniform(t.ones(2), t.zeros(2), validate_args=True),
    "value_shape": lambda t: t.distributions.Normal(t.zeros(3), 1.0).log_prob(t.zeros(2)),
    "independent_ndims": lambda t: t.distributions.Independent(t.distributions.Normal(t.zeros(3), 1.0), 2),
    "binomial_value": lambda t: t.distributions.Binomial(3, probs=t.tensor([0.5])).log_prob(t.tensor([4.0])),
    "kl_unregistered": lambda t: t.distributions.kl_divergence(
        t.distributions.StudentT(3.0), t.distributions.Normal(0., 1.)),
    "mixture_shapes": lambda t: t.distributions.MixtureSameFamily(
        t.distributions.Categorical(logits=t.zeros(3)), t.distributions.Normal(t.zeros(4), 1.0)),
    "mixture_rsample": lambda t: t.distributions.MixtureSameFamily(
        t.distributions.Categorical(logits=t.zeros(3)), t.distributions.Normal(t.zeros(3), 1.0)).rsample(),
    "mixture_entropy": lambda t: t.distributions.MixtureSameFamily(
        t.distributions.Categorical(logits=t.zeros(3)), t.distributions.Normal(t.zeros(3), 1.0)).entropy(),
    "transformed_mean": lambda t: t.distributions.TransformedDistribution(
        t.distributions.Normal(0., 1.), t.distributions.transforms.ExpTransform()).mean,
    "poisson_cdf": lambda t: t.distributions.Poisson(t.ones(2)).cdf(t.ones(2)),
    "expand_to_a_smaller_shape": lambda t: t.distributions.Normal(t.zeros(3), 1.0).expand([4, 2]),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_errors_with_torchs_type_and_text(name):
    import torch
    import llgrad
    got = []
    for lib in (torch, llgrad):
        # (validation on, as by default: another test of the process may have turned it off)
        before = lib.distributions.Distribution._validate_args
        lib.distributions.Distribution.set_default_validate_args(True)
        try:
            BAD[name](lib)
            got.append(None)
        except Exception as e:      # (compared with torch's)
            got.append((type(e).__name__, str(e).replace(lib.__name__ + ".", "torch.")))
        finally:
            lib.distributions.Distribution.set_default_validate_args(before)
    assert got[0] is not None
    assert got[1] == got[0]


def test_compiled_sac_step_draws_torchs_stream():
    """A compiled step drawing a tanh-squashed action, Gamma and Beta rsamples and a
    Categorical sample, seeded once outside: each call equals torch's (values and grads)."""
    import torch
    import llgrad

    def step(torch, mu, ls):
        D, T = torch.distributions, torch.distributions.transforms
        d = D.TransformedDistribution(D.Normal(mu, ls.exp()), [T.TanhTransform(cache_size=1)])
        a = d.rsample()
        g, b = D.Gamma(ls.exp() + 0.5, 1.0).rsample(), D.Beta(ls.exp(), 2.0).rsample()
        return d.log_prob(a).sum() + g.sum() + b.sum(), a, D.Categorical(logits=mu).sample(), g

    def run(lib, fn):
        lib.manual_seed(123)
        outs = []
        for _ in range(4):
            m, s = lib.tensor(r(1, 4, 3), requires_grad=True), lib.tensor(r(2, 4, 3, scale=0.3), requires_grad=True)
            o = fn(lib, m, s)
            o[0].backward()
            outs.append([x.detach().numpy().copy() for x in o] + [m.grad.numpy(), s.grad.numpy()])
        return outs

    want = run(torch, step)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for got in (run(llgrad, step), run(llgrad, llgrad.compile(step))):
            for w_call, g_call in zip(want, got):
                for w, g in zip(w_call, g_call):
                    np.testing.assert_allclose(g, w, rtol=2e-5, atol=1e-5)
