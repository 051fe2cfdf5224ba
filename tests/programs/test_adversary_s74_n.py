"""Session 74 (n), torch.distributions against PyTorch, continuous families: log_prob, cdf,
icdf, entropy and the moments of Normal, MultivariateNormal (scale_tril, covariance and
precision), LowRankMultivariateNormal, Beta, Gamma, Dirichlet, Exponential, Laplace,
Uniform, LogNormal, StudentT, Cauchy, MixtureSameFamily, Independent and
TransformedDistribution (Exp, Affine, Tanh as SAC's squashed Gaussian, Sigmoid), with the
gradients of their parameters: torch, llgrad eager and llgrad.compile
(adversarial_harness_s69_a10.check). The discrete families, KL pairs, draws and
validation are in test_adversary_s74_n_2.py.

Finding fixed here: Gamma/Chi2.cdf (llgrad/distributions/_special.py gammainc) dropped the
gradient of the concentration silently (None, or an output not requiring grad) where
PyTorch's backward raises NotImplementedError ("the derivative for 'igamma: input' is not
implemented."), and gave NaN for an infinite concentration and 0 for a negative value
where PyTorch's igamma gives 0 and NaN."""
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


# ---- the fixed finding (fast, unmarked)

def gamma_cdf_concentration_grad(torch, a, x):
    return torch.distributions.Gamma(a.exp(), 1.0).cdf(x.exp())


def chi2_cdf_df_grad(torch, df):
    return torch.distributions.Chi2(df.exp()).cdf(torch.ones(3))


def test_gamma_cdf_backward_to_the_concentration_raises_as_torch():
    check(gamma_cdf_concentration_grad, G(r(1, 3)), G(r(2, 3)),
          compiled_warns="igamma: input")
    check(chi2_cdf_df_grad, G(r(1, 3)), compiled_warns="igamma: input")


def test_gamma_cdf_edges_are_torchs_igamma():
    import torch
    import llgrad
    inf, nan = float("inf"), float("nan")
    conc = [inf, inf, 2., 2., 2., 2., 50., 1e-3]
    value = [1., inf, inf, 0., -1., 1e-30, 49., 1e-3]
    got = []
    for lib in (torch, llgrad):
        d = lib.distributions.Gamma(lib.tensor(conc), 1.0, validate_args=False)
        got.append(d.cdf(lib.tensor(value)).numpy())
    np.testing.assert_allclose(got[1], got[0], rtol=1e-5, equal_nan=True)
    x = llgrad.tensor([1.0, 2.0], requires_grad=True)       # (the value's grad stays)
    llgrad.distributions.Gamma(llgrad.tensor([1.0, 2.0]), 1.0).cdf(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [np.exp(-1.0), 2 * np.exp(-2.0)], rtol=1e-6)


# ---- the sweep

def normal_all(torch, loc, scale, x):
    d = torch.distributions.Normal(loc, scale.exp())
    return (d.log_prob(x), d.cdf(x), d.icdf(torch.sigmoid(x)), d.entropy(), d.mean, d.mode,
            d.variance, d.stddev, tuple(d.batch_shape), tuple(d.event_shape), d.log_prob(0.5))


def _tril(torch, a):
    return (torch.tril(a, -1)
            + torch.diag_embed(torch.nn.functional.softplus(a.diagonal(dim1=-2, dim2=-1)) + 1.0))


def mvn_scale_tril(torch, loc, a, x):
    d = torch.distributions.MultivariateNormal(loc, scale_tril=_tril(torch, a))
    return (d.log_prob(x), d.entropy(), d.mean, d.mode, d.variance, d.stddev,
            d.covariance_matrix, d.precision_matrix, tuple(d.batch_shape), tuple(d.event_shape))


def mvn_covariance(torch, loc, a, x):
    d = torch.distributions.MultivariateNormal(loc, covariance_matrix=a @ a.mT + torch.eye(3))
    return d.log_prob(x), d.entropy(), d.scale_tril, d.variance


def mvn_precision(torch, loc, a, x):
    d = torch.distributions.MultivariateNormal(loc, precision_matrix=a @ a.mT + torch.eye(3))
    return d.log_prob(x), d.entropy(), d.scale_tril, d.covariance_matrix, d.variance


def mvn_batch_broadcast(torch, loc, a, x):
    L = torch.tril(a) + 3 * torch.eye(3)
    d = torch.distributions.MultivariateNormal(loc.unsqueeze(1), scale_tril=L)  # batch (2, 2)
    return d.log_prob(x), tuple(d.batch_shape), d.entropy()


def lowrank(torch, loc, w, dg, x):
    d = torch.distributions.LowRankMultivariateNormal(loc, w, dg.exp())
    return (d.log_prob(x), d.entropy(), d.variance, d.covariance_matrix, d.precision_matrix,
            d.scale_tril, d.mode)


def beta(torch, a, b, x):
    d = torch.distributions.Beta(a.exp(), b.exp())
    return (d.log_prob(torch.sigmoid(x)), d.entropy(), d.mean, d.mode, d.variance,
            d.log_prob(torch.tensor([0., 1., 0.5, 0.25])))


def gamma_dirichlet(torch, a, b, x):
    D = torch.distributions
    g = D.Gamma(a.exp(), b.exp())
    d = D.Dirichlet(a.exp() * 0.05 + b.exp())
    return (g.log_prob(x.exp()), g.entropy(), g.mean, g.mode, g.variance,
            D.Gamma(a.detach().exp(), b.exp()).cdf(x.exp()),
            d.log_prob(x.softmax(-1)), d.entropy(), d.mean, d.mode, d.variance)


def exponential_laplace_uniform(torch, a, x):
    D = torch.distributions
    e, la, u = D.Exponential(a.exp()), D.Laplace(a, a.exp()), D.Uniform(a - 1, a.exp() + a)
    p = torch.sigmoid(x)
    return (e.log_prob(x.exp()), e.cdf(x.exp()), e.icdf(p), e.entropy(), e.mode, e.variance,
            la.log_prob(x), la.cdf(x), la.icdf(p), la.entropy(), la.variance, la.cdf(a),
            u.log_prob(a), u.cdf(x), u.icdf(p), u.entropy(), u.mean, u.variance, u.stddev)


def lognormal_studentt_cauchy(torch, a, x):
    D = torch.distributions
    ln, c = D.LogNormal(a, a.exp()), D.Cauchy(a, a.exp())
    st = D.StudentT(a.exp() + 2, a, a.exp())
    p = torch.sigmoid(x)
    return (ln.log_prob(x.exp()), ln.entropy(), ln.mean, ln.mode, ln.variance,
            ln.cdf(x.exp()), ln.icdf(p), st.log_prob(x), st.entropy(), st.mean, st.variance,
            c.log_prob(x), c.cdf(x), c.icdf(p), c.entropy(), c.mode)


def studentt_df_edges(torch, x):
    D = torch.distributions
    small = D.StudentT(torch.tensor([0.5, 1.0, 1.5, 2.0, 3.0]))
    big = D.StudentT(torch.tensor([1e6, 30., 1.]), 0., 2.)
    return small.mean, small.variance, big.log_prob(x), big.entropy(), big.variance


def icdf_edges(torch):
    D = torch.distributions
    p = torch.tensor([0., 1., 0.5, 1e-7])
    return (D.Normal(torch.zeros(4), 1.0).icdf(p), D.Exponential(torch.ones(4)).icdf(p),
            D.Cauchy(0., 1.).icdf(p), D.Laplace(0., 1.).icdf(p), D.Uniform(0., 2.).icdf(p))


def normal_nonfinite_values(torch, a):
    d = torch.distributions.Normal(a, 1.0, validate_args=False)
    inf, nan = float("inf"), float("nan")
    return d.cdf(torch.tensor([inf, -inf, nan])), d.log_prob(torch.tensor([inf, 0., nan]))


def logprob_value_grads(torch, loc, v):
    D = torch.distributions
    return (D.Normal(loc, 2.0).log_prob(v), D.Laplace(loc, 1.0).log_prob(v),
            D.StudentT(3.0, loc).log_prob(v), D.Cauchy(loc, 1.0).log_prob(v))


def mixture_normal(torch, w, loc, sc, x):
    D = torch.distributions
    m = D.MixtureSameFamily(D.Categorical(logits=w), D.Normal(loc, sc.exp()))
    return m.log_prob(x), m.mean, m.variance, m.cdf(x), tuple(m.batch_shape)


def mixture_vector(torch, w, loc, x):
    D = torch.distributions
    ind = D.MixtureSameFamily(D.Categorical(logits=w),
                              D.Independent(D.Normal(loc, torch.ones_like(loc)), 1))
    mvn = D.MixtureSameFamily(D.Categorical(logits=w),
                              D.MultivariateNormal(loc, torch.eye(2) * 0.5))
    return (ind.log_prob(x), ind.mean, ind.variance, tuple(ind.event_shape),
            mvn.log_prob(x), mvn.mean, mvn.variance)


def independent(torch, loc, sc, x):
    D = torch.distributions
    d2, d1 = D.Independent(D.Normal(loc, sc.exp()), 2), D.Independent(D.Normal(loc, sc.exp()), 1)
    d0 = D.Independent(D.Normal(loc, 1.0), 0)
    return (d2.log_prob(x), d2.entropy(), tuple(d2.batch_shape), tuple(d2.event_shape),
            d1.log_prob(x), d1.entropy(), d2.mean, d2.variance, d2.mode, d0.log_prob(loc))


def transformed_exp_affine(torch, loc, sc, x):
    D, T = torch.distributions, torch.distributions.transforms
    d = D.TransformedDistribution(D.Normal(loc, sc.exp()),
                                  [T.ExpTransform(), T.AffineTransform(1.0, 2.0)])
    y = x.exp() * 2 + 1
    return d.log_prob(y), d.cdf(y), d.icdf(torch.sigmoid(x))


def transformed_negative_affine_uniform(torch, a):
    D, T = torch.distributions, torch.distributions.transforms
    d = D.TransformedDistribution(D.Uniform(torch.zeros(3), torch.ones(3)),
                                  [T.AffineTransform(a, -2.0)])
    return d.log_prob(a - 1.0), d.cdf(a - 1.0), d.icdf(torch.tensor([0.1, 0.5, 0.9]))


def transformed_event_dim(torch, x, s):
    D, T = torch.distributions, torch.distributions.transforms
    base = D.Independent(D.Normal(torch.zeros(3), 1.0), 1)
    d = D.TransformedDistribution(base, [T.AffineTransform(x, s.exp(), event_dim=1)])
    sig = D.TransformedDistribution(D.Normal(torch.zeros(2, 3), 1.0),
                                    [T.ExpTransform(), T.SigmoidTransform()])
    y = torch.sigmoid(x.exp())
    return (d.log_prob(x), tuple(d.event_shape), sig.log_prob(y), tuple(sig.batch_shape),
            sig.cdf(y))


def sac_tanh_log_prob(torch, mu, ls, eps):
    D, T = torch.distributions, torch.distributions.transforms
    d = D.TransformedDistribution(D.Normal(mu, ls.clamp(-5, 2).exp()),
                                  [T.TanhTransform(cache_size=1)])
    a = torch.tanh(mu + ls.exp() * eps)
    return d.log_prob(a).sum(-1), a, d.log_prob(torch.tensor([0.999999, -1.0]))


def tanh_transform_large(torch, x):
    t = torch.distributions.transforms.TanhTransform()
    y = t(x * 20)
    return t.log_abs_det_jacobian(x * 20, y), y, t.inv(torch.tensor([0.5, -0.999]))


def compose_and_biject(torch, x):
    D, T, C = torch.distributions, torch.distributions.transforms, torch.distributions.constraints
    t = T.ComposeTransform([T.AffineTransform(1.0, -2.0), T.ExpTransform(), T.PowerTransform(2.0)])
    y = t(x)
    return (y, t.inv(y), t.log_abs_det_jacobian(x, y), t.sign, t.inv.inv is t,
            D.biject_to(C.positive)(x), D.transform_to(C.simplex)(x), D.biject_to(C.simplex)(x),
            D.biject_to(C.interval(-2., 3.))(x), D.biject_to(C.lower_cholesky)(torch.outer(x, x)))


def lowrank_training_loss(torch, loc, w, dg, x):
    d = torch.distributions.LowRankMultivariateNormal(loc, w, dg.exp())
    return d.log_prob(x).sum() + d.entropy().sum()


def half_normal_log_prob(torch, x):
    return torch.distributions.Normal(x.half(), 1.0).log_prob(torch.zeros(3, dtype=torch.float16)).float()


SWEEP = [
    (normal_all, [G(r(1, 2, 3)), G(r(2, 2, 3)), r(3, 2, 3)], None),
    (mvn_scale_tril, [G(r(1, 2, 3)), G(r(2, 2, 3, 3)), r(3, 4, 2, 3)], None),
    (mvn_covariance, [G(r(1, 3)), G(r(2, 3, 3)), r(3, 5, 3)], None),
    (mvn_precision, [G(r(1, 3)), G(r(2, 3, 3)), r(3, 5, 3)], None),
    (mvn_batch_broadcast, [G(r(1, 2, 3)), G(r(2, 2, 3, 3)), r(3, 2, 2, 3)], None),
    (lowrank, [G(r(1, 2, 3)), G(r(2, 2, 3, 2)), G(r(4, 2, 3)), r(3, 2, 3)], None),
    (beta, [G(r(1, 4)), G(r(2, 4)), r(3, 4)], None),
    (gamma_dirichlet, [G(r(1, 4)), G(r(2, 4)), r(3, 4)], None),
    (exponential_laplace_uniform, [G(r(1, 4)), r(2, 4)], None),
    (lognormal_studentt_cauchy, [G(r(1, 4)), r(2, 4)], None),
    (studentt_df_edges, [r(2, 3)], None),
    (icdf_edges, [], None),
    (normal_nonfinite_values, [G(r(1, 1))], None),
    (logprob_value_grads, [G(r(1, 3)), G(r(2, 3))], None),
    (mixture_normal, [G(r(1, 2, 3)), G(r(2, 2, 3)), G(r(3, 2, 3)), r(4, 2)], None),
    (mixture_vector, [G(r(1, 3)), G(r(2, 3, 2)), r(4, 5, 2)], None),
    (independent, [G(r(1, 2, 3)), G(r(2, 2, 3)), r(3, 4, 2, 3)], None),
    (transformed_exp_affine, [G(r(1, 3)), G(r(2, 3)), r(3, 3)], None),
    (transformed_negative_affine_uniform, [G(np.array([0.3, 0.5, 1.0], F32))], None),
    (transformed_event_dim, [G(r(1, 3)), G(r(2, 3))], None),
    (sac_tanh_log_prob, [G(r(1, 4, 2)), G(r(2, 4, 2, scale=0.3)), r(3, 4, 2)], None),
    (tanh_transform_large, [G(r(1, 4))], None),
    (compose_and_biject, [G(r(1, 3))], None),
    (lowrank_training_loss, [G(r(1, 3)), G(r(2, 3, 2)), G(r(3, 3)), r(4, 5, 3)], None),
    (half_normal_log_prob, [r(1, 3)], "interpreter"),
]


@pytest.mark.slow
@pytest.mark.parametrize("fn,specs,warns", SWEEP, ids=[c[0].__name__ for c in SWEEP])
def test_continuous_sweep(fn, specs, warns):
    check(fn, *specs, rtol=2e-5, atol=1e-5, compiled_warns=warns)
