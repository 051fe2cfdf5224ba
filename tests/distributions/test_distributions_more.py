"""llgrad.distributions against torch.distributions: Independent, MixtureSameFamily,
Uniform and MultivariateNormal (log_prob, moments, entropy, shapes, gradients, validation
errors, kl_divergence of their pairs), torch.broadcast_shapes, and a mixture density loss
and a multivariate-normal prior inside llgrad.compile (its triangular solve as native code)."""
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402


@pytest.fixture(autouse=True)
def _torch_validates():
    """(torch.compile elsewhere in the process can switch PyTorch's validation off.)"""
    before = torch.distributions.Distribution._validate_args
    torch.distributions.Distribution.set_default_validate_args(True)
    yield
    torch.distributions.Distribution.set_default_validate_args(before)


def _data(lib, *shape, seed=0, positive=False):
    a = np.random.default_rng(seed + len(shape) * 7 + sum(shape)).standard_normal(shape)
    a = np.abs(a) + 0.3 if positive else a
    return lib.tensor(a.astype(np.float32))


def _same(fn):
    want, got = fn(torch), fn(llgrad)
    assert len(want) == len(got)
    for a, b in zip(want, got):
        if isinstance(a, (tuple, bool, str, int)):
            assert (tuple(b) if isinstance(a, tuple) else b) == a
        else:
            np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(),
                                       rtol=2e-5, atol=2e-6)


def test_independent_normal_log_prob_entropy_kl_and_grads():
    def f(t):
        D = t.distributions
        loc = _data(t, 3, 2).requires_grad_()
        scale = _data(t, 3, 2, positive=True).requires_grad_()
        q = D.Independent(D.Normal(loc, scale), 1)
        p = D.Independent(D.Normal(t.zeros(3, 2), t.ones(3, 2)), 1)
        lp, kl = q.log_prob(_data(t, 4, 3, 2)), D.kl_divergence(q, p)
        (lp.sum() + kl.sum()).backward()
        return (lp, kl, q.entropy(), q.mean, q.variance, loc.grad, scale.grad,
                tuple(q.batch_shape), tuple(q.event_shape), tuple(q.rsample((5,)).shape),
                tuple(q.expand((2, 3)).log_prob(_data(t, 3, 2)).shape), q.has_rsample)
    _same(f)
    with pytest.raises(ValueError, match="reinterpreted_batch_ndims"):
        llgrad.distributions.Independent(llgrad.distributions.Normal(0., 1.), 1)


def test_mixture_same_family_matches_torch():
    def f(t):
        D = t.distributions
        logits = _data(t, 4, 3).requires_grad_()
        mu = _data(t, 4, 3, seed=1).requires_grad_()
        mix = D.MixtureSameFamily(D.Categorical(logits=logits),
                                  D.Normal(mu, _data(t, 4, 3, positive=True)))
        lp = mix.log_prob(_data(t, 5, 4))
        lp.sum().backward()
        comp = D.Independent(D.Normal(_data(t, 2, 3, 2), _data(t, 2, 3, 2, positive=True)), 1)
        gmm = D.MixtureSameFamily(D.Categorical(probs=_data(t, 3, positive=True)), comp)
        return (lp, logits.grad, mu.grad, mix.mean, mix.variance, mix.cdf(_data(t, 4)),
                gmm.log_prob(_data(t, 5, 2, 2)), gmm.mean, gmm.variance,
                tuple(gmm.batch_shape), tuple(gmm.event_shape),
                tuple(mix.sample((6,)).shape), tuple(mix.expand((2, 4)).batch_shape))
    _same(f)
    D = llgrad.distributions
    with pytest.raises(ValueError, match="does not equal"):
        D.MixtureSameFamily(D.Categorical(logits=llgrad.zeros(2)),
                            D.Normal(llgrad.zeros(3), llgrad.ones(3)))


def test_uniform_matches_torch():
    def f(t):
        D = t.distributions
        low = t.tensor([0.0, -1.0]).requires_grad_()
        u = D.Uniform(low, t.tensor([1.0, 2.0]))
        v = t.tensor([0.5, 1.5])
        (u.log_prob(v).sum() + u.entropy().sum() + u.cdf(v).sum()).backward()
        wide = D.Uniform(t.tensor([-1.0, -2.0]), 3.0)
        return (u.log_prob(v), u.cdf(v), u.icdf(v * 0.3), u.entropy(), u.mean, u.stddev,
                u.variance, low.grad, tuple(u.rsample((3,)).shape),
                D.kl_divergence(u, wide), D.kl_divergence(wide, u),
                D.kl_divergence(u, D.Normal(0.0, t.tensor([1.0, 2.0]))),
                D.Uniform(0.0, 2.0, validate_args=False).log_prob(t.tensor([3.0, 1.0])))
    _same(f)
    with pytest.raises(ValueError, match="Expected parameter low"):
        llgrad.distributions.Uniform(llgrad.tensor([1.0]), llgrad.tensor([0.0]))
    with pytest.raises(ValueError, match="within the support"):
        llgrad.distributions.Uniform(0.0, 1.0).log_prob(llgrad.tensor(2.0))


def test_multivariate_normal_matches_torch():
    def f(t):
        D = t.distributions
        loc = _data(t, 3, 2).requires_grad_()
        A = _data(t, 2, 2)
        cov = (A @ A.t() + t.eye(2)).requires_grad_()
        m1 = D.MultivariateNormal(loc, covariance_matrix=cov)
        m2 = D.MultivariateNormal(t.zeros(2), precision_matrix=t.tensor([[2.0, 0.3],
                                                                          [0.3, 1.0]]))
        m3 = D.MultivariateNormal(loc, scale_tril=t.tensor([[1.0, 0.], [0.4, 0.7]]))
        x = _data(t, 4, 3, 2)
        lp, kl = m1.log_prob(x), D.kl_divergence(m1, m3)
        (lp.sum() + kl.sum() + m1.entropy().sum()).backward()
        return (lp, kl, loc.grad, cov.grad, m1.entropy(), m1.variance, m1.scale_tril,
                m1.precision_matrix, m2.log_prob(x), m2.covariance_matrix, m2.scale_tril,
                m3.covariance_matrix, tuple(m1.batch_shape), tuple(m1.event_shape),
                tuple(m1.rsample((5,)).shape), m1.expand((2, 3)).log_prob(x[:2]))
    _same(f)
    D = llgrad.distributions
    with pytest.raises(ValueError, match="Expected parameter covariance_matrix"):
        D.MultivariateNormal(llgrad.zeros(2), llgrad.tensor([[1.0, 2.0], [2.0, 1.0]]))
    with pytest.raises(ValueError, match="Expected parameter scale_tril"):
        D.MultivariateNormal(llgrad.zeros(2), scale_tril=llgrad.tensor([[1.0, 1.0],
                                                                        [0.0, 1.0]]))
    with pytest.raises(ValueError, match="Exactly one of"):
        D.MultivariateNormal(llgrad.zeros(2))


def test_broadcast_shapes_matches_torch():
    for shapes in [((2, 1), (3,)), (2, (3, 1)), (), (torch.Size([0, 1]), (3,))]:
        got = llgrad.broadcast_shapes(*shapes)
        assert isinstance(got, llgrad.Size) and tuple(got) == tuple(
            torch.broadcast_shapes(*shapes))
    for shapes in [((2,), (3,)), ((2,), (-1,))]:
        with pytest.raises(RuntimeError) as want:
            torch.broadcast_shapes(*shapes)
        with pytest.raises(RuntimeError) as got:
            llgrad.broadcast_shapes(*shapes)
        assert str(got.value) == str(want.value)


@pytest.mark.parametrize("backend", ["eager", "compiled"])
def test_mixture_and_mvn_losses_compile(backend):
    """A mixture density loss and a flow's multivariate-normal prior train the same under
    llgrad.compile as eagerly and as in PyTorch."""
    def run(t, compile=None):
        D = t.distributions
        w = _data(t, 1, 9).requires_grad_()
        prior = D.MultivariateNormal(t.zeros(3), t.eye(3))

        def step(x, y):
            logits, mu, ls = (x @ w).chunk(3, -1)
            gmm = D.MixtureSameFamily(D.Categorical(logits=logits), D.Normal(mu, ls.exp()))
            loss = -gmm.log_prob(y).mean() - prior.log_prob(mu).mean()
            loss.backward()
            with t.no_grad():
                w.sub_(0.1 * w.grad)
                w.grad.zero_()
            return loss.detach()

        cf = compile(step) if compile else step
        x, y = _data(t, 8, 1), _data(t, 8, seed=3)
        out = [cf(x, y).numpy() for _ in range(3)] + [w.detach().numpy()]
        if compile:     # (native code, linalg_solve_triangular included: no interpreter)
            cf.wait()
            assert cf.entries and all(not isinstance(k, str) for e in cf.entries
                                      for k in e.kernels.values()), \
                [e.kernels for e in cf.entries]
        return out

    want = run(torch)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = run(llgrad, llgrad.compile if backend == "compiled" else None)
    for a, b in zip(want, got):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
