"""llgrad.distributions against torch.distributions for the distributions added after the
first set: HalfNormal, Cauchy, HalfCauchy, Gumbel, Weibull, Pareto (log_prob, cdf, icdf,
entropy, moments, shapes, expand, gradients, validation errors, reparameterised samples
through the same base noise, sample statistics)."""
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
        np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=2e-5,
                                   atol=1e-5, err_msg=what)


def _same(fn):
    want, got = fn(torch), fn(llgrad)
    assert len(want) == len(got)
    for i, (a, b) in enumerate(zip(want, got)):
        _check(a, b, f"item {i}")


# name -> (make(t, params), params(t), value(t), has_entropy, has_cdf)
CASES = {
    "HalfNormal": (lambda t, p: t.distributions.HalfNormal(p[0]),
                   lambda t: [_data(t, 3, 4, positive=True)],
                   lambda t: _data(t, 2, 3, 4, seed=2, positive=True), True, True),
    "Cauchy": (lambda t, p: t.distributions.Cauchy(p[0], p[1]),
               lambda t: [_data(t, 3, 4), _data(t, 4, seed=1, positive=True)],
               lambda t: _data(t, 2, 3, 4, seed=2), True, True),
    "HalfCauchy": (lambda t, p: t.distributions.HalfCauchy(p[0]),
                   lambda t: [_data(t, 5, positive=True)],
                   lambda t: _data(t, 3, 5, seed=2, positive=True), True, True),
    "Gumbel": (lambda t, p: t.distributions.Gumbel(p[0], p[1]),
               lambda t: [_data(t, 3, 4) * 0.3, _data(t, 3, 4, seed=1, positive=True) + 1],
               lambda t: _data(t, 3, 4, seed=2), True, True),
    "Weibull": (lambda t, p: t.distributions.Weibull(p[0], p[1]),
                lambda t: [_data(t, 3, 4, positive=True), _data(t, 3, 4, seed=1, positive=True)],
                lambda t: _data(t, 3, 4, seed=2, positive=True), True, True),
    "Pareto": (lambda t, p: t.distributions.Pareto(p[0], p[1]),
               lambda t: [_data(t, 4, positive=True), _data(t, 4, seed=1, positive=True) * 3],
               lambda t: _data(t, 2, 4, seed=2, positive=True) + 2, True, True),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_log_prob_moments_entropy_shapes_and_grads(name):
    make, params, value, has_entropy, has_cdf = CASES[name]

    def f(t):
        ps = [p.requires_grad_() for p in params(t)]
        d = make(t, ps)
        v = value(t)
        lp = d.log_prob(v)
        out = [lp, d.mean, d.variance, d.mode, tuple(d.batch_shape), tuple(d.event_shape),
               d.has_rsample, tuple(d.sample((2,)).shape),
               repr(d.support).split("(")[0]]
        total = lp.sum()
        if has_entropy:
            out.append(d.entropy())
            total = total + d.entropy().sum()
        if has_cdf:
            u = d.cdf(v)
            out += [u, d.icdf(u.detach().clamp(0.05, 0.95))]
            total = total + u.sum()
        total.backward()
        out += [p.grad for p in ps]
        e = d.expand((2,) + tuple(d.batch_shape))
        v1 = v.reshape((-1,) + tuple(d.batch_shape) + tuple(d.event_shape))[:1]
        out += [tuple(e.batch_shape), e.log_prob(v1), e.mean, type(e).__name__]
        if d.has_rsample:
            out.append(tuple(d.rsample((3,)).shape))
        return out
    _same(f)


@pytest.mark.parametrize("name", ["Gumbel", "Weibull", "Pareto"])
def test_rsample_through_the_same_base_noise_as_torch(name):
    """The transforms of torch's construction pushed over one base draw: the same values,
    parameter gradients and grad_fn."""
    make, params, _, _, _ = CASES[name]
    llgrad.manual_seed(0)
    pl = [p.requires_grad_() for p in params(llgrad)]
    pt = [torch.tensor(p.detach().numpy()).requires_grad_() for p in pl]
    dl, dt = make(llgrad, pl), make(torch, pt)
    assert [type(tr).__name__ for tr in dl.transforms] == \
        [type(tr).__name__ for tr in dt.transforms]
    base = dl.base_dist.sample((5,))
    yl, yt = base, torch.tensor(base.numpy())
    for trl, trt in zip(dl.transforms, dt.transforms):
        yl, yt = trl(yl), trt(yt)
    (yl ** 2).mean().backward()
    (yt ** 2).mean().backward()
    np.testing.assert_allclose(yl.detach().numpy(), yt.detach().numpy(), rtol=1e-5, atol=1e-6)
    for a, b in zip(pl, pt):
        assert (a.grad is None) == (b.grad is None)
        if b.grad is not None:
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-4, atol=1e-6)
    assert type(yl.grad_fn).__name__ == type(yt.grad_fn).__name__


# name -> d x / d param of a draw x, by the reparameterisation (the base noise recovered)
RSAMPLE_GRADS = {
    "HalfNormal": lambda x, p: [x / p[0]],
    "HalfCauchy": lambda x, p: [x / p[0]],
    "Pareto": lambda x, p: [x / p[0], -x * (x / p[0]).log() / p[1]],
    "Weibull": lambda x, p: [x / p[0], -x * (x / p[0]).log() / p[1]],
    "Gumbel": lambda x, p: [llgrad.ones_like(x), (x - p[0]) / p[1]],
}


@pytest.mark.parametrize("name", sorted(RSAMPLE_GRADS))
def test_rsample_gradients_follow_the_reparameterisation(name):
    make, params, _, _, _ = CASES[name]
    llgrad.manual_seed(2)
    ps = [p.requires_grad_() for p in params(llgrad)]
    d = make(llgrad, ps)
    assert d.has_rsample
    x = d.rsample((6,))
    x.sum().backward()
    want = RSAMPLE_GRADS[name](x.detach(), [p.detach() for p in ps])
    for p, w in zip(ps, want):
        assert p.grad is not None and np.isfinite(p.grad.numpy()).all()
        w = w.sum(0)
        w = w.sum_to_size(p.shape) if tuple(w.shape) != tuple(p.shape) else w
        np.testing.assert_allclose(p.grad.numpy(), w.numpy(), rtol=1e-3, atol=1e-5)


def test_cauchy_rsample_is_loc_plus_scale_times_noise():
    llgrad.manual_seed(1)
    loc = llgrad.tensor([0.5, -1.]).requires_grad_()
    scale = llgrad.tensor([2., 0.3]).requires_grad_()
    x = llgrad.distributions.Cauchy(loc, scale).rsample((4,))
    x.sum().backward()
    eps = ((x.detach() - loc.detach()) / scale.detach())
    np.testing.assert_allclose(scale.grad.numpy(), eps.sum(0).numpy(), rtol=1e-5)
    np.testing.assert_allclose(loc.grad.numpy(), [4., 4.])


@pytest.mark.parametrize("bad", [
    lambda D, t: D.HalfNormal(t.tensor([1., -1.])),
    lambda D, t: D.Cauchy(0., t.tensor([0.])),
    lambda D, t: D.HalfCauchy(t.tensor([-2.])),
    lambda D, t: D.Gumbel(t.tensor([0.]), t.tensor([-1.])),
    lambda D, t: D.Weibull(t.tensor([1.]), t.tensor([0.])),
    lambda D, t: D.Pareto(t.tensor([1.]), t.tensor([-1.])),
])
def test_invalid_parameters_raise_as_torch(bad):
    with pytest.raises(ValueError) as want:
        bad(torch.distributions, torch)
    with pytest.raises(ValueError) as got:
        bad(llgrad.distributions, llgrad)
    head = str(want.value).split("(")[0]
    assert str(got.value).startswith(head)


@pytest.mark.parametrize("bad", [
    lambda D, t: D.HalfNormal(t.tensor(1.)).log_prob(t.tensor(-1.)),
    lambda D, t: D.HalfCauchy(t.tensor(1.)).log_prob(t.tensor(-1.)),
    lambda D, t: D.Weibull(t.tensor(1.), t.tensor(1.)).log_prob(t.tensor(-1.)),
    lambda D, t: D.Pareto(t.tensor(2.), t.tensor(1.)).log_prob(t.tensor(1.)),
    lambda D, t: D.Cauchy(0., 1.).log_prob(t.tensor(float("nan"))),
])
def test_values_outside_the_support_raise_as_torch(bad):
    with pytest.raises(ValueError, match="to be within the support"):
        bad(torch.distributions, torch)
    with pytest.raises(ValueError, match="to be within the support"):
        bad(llgrad.distributions, llgrad)


def test_sample_statistics():
    llgrad.manual_seed(0)
    D, n = llgrad.distributions, 40000
    cases = [D.HalfNormal(llgrad.tensor([0.5, 3.])), D.Gumbel(llgrad.tensor([1., -2.]), 2.),
             D.Weibull(llgrad.tensor([1., 2.]), llgrad.tensor([1.5, 4.])),
             D.Pareto(llgrad.tensor([1., 2.]), llgrad.tensor([5., 6.]))]
    for d in cases:
        s = d.sample((n,))
        assert bool(d.support.check(s).all()), d
        se = (d.variance / n).sqrt()
        assert bool(((s.mean(0) - d.mean).abs() < 5 * se).all()), d
        np.testing.assert_allclose(s.var(0).numpy(), d.variance.numpy(), rtol=0.15, err_msg=repr(d))
    # the Cauchy's and half-Cauchy's medians (their means do not exist)
    c = D.Cauchy(llgrad.tensor([1., -3.]), llgrad.tensor([0.5, 2.])).sample((n,))
    np.testing.assert_allclose(c.median(0)[0].numpy(), [1., -3.], atol=0.05)
    hc = D.HalfCauchy(llgrad.tensor([2.])).sample((n,))
    np.testing.assert_allclose(hc.median(0)[0].numpy(), [2.], rtol=0.05)
