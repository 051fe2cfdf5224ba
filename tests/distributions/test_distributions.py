"""llgrad.distributions against torch.distributions: Categorical, Normal and Bernoulli
(probs / logits, log_prob, entropy, shapes, gradients), argument and sample validation with
PyTorch's errors, kl_divergence, and Categorical inside llgrad.compile (its draws keep the
generator's state, its validation reads become value guards)."""
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402


@pytest.fixture(autouse=True)
def _torch_validates():
    """torch.compile (run by other tests in this process) turns PyTorch's default argument
    validation of distributions off for good: these tests compare against it switched on."""
    before = torch.distributions.Distribution._validate_args
    torch.distributions.Distribution.set_default_validate_args(True)
    yield
    torch.distributions.Distribution.set_default_validate_args(before)


def _np(v):
    if hasattr(v, "detach"):
        return v.detach().numpy()
    return v


def _same(fn):
    want, got = fn(torch), fn(llgrad)
    assert len(want) == len(got)
    for a, b in zip(want, got):
        if isinstance(a, (torch.Size, tuple, bool, str, int)):
            assert tuple(b) == tuple(a) if isinstance(a, tuple) else b == a
        else:
            np.testing.assert_allclose(_np(b), _np(a), rtol=1e-5, atol=1e-6)


P = [[0.1, 0.2, 0.7], [0.5, 0.25, 0.25]]


def test_categorical_probs_and_logits():
    def fn(L):
        D = L.distributions
        p = L.tensor(P, requires_grad=True)
        m = D.Categorical(probs=p * 2)
        lp = m.log_prob(L.tensor([2, 0]))
        ent = m.entropy()
        (lp.sum() + ent.sum()).backward()
        n = D.Categorical(logits=L.tensor([1.0, -1.0, 0.5]))
        return (lp, ent, m.probs, m.logits, p.grad, m.batch_shape, m.event_shape,
                m.param_shape, n.probs, n.logits, n.log_prob(L.tensor([[0, 2], [1, 1]])),
                n.entropy(), m.sample((4, 5)).shape, n.sample().shape, m.mode,
                m.enumerate_support(), n.perplexity(), m.expand((3, 2)).batch_shape)
    _same(fn)


def test_normal_and_bernoulli():
    def fn(L):
        D = L.distributions
        loc = L.tensor([0.0, 1.0], requires_grad=True)
        n = D.Normal(loc, 2.0)
        v = L.tensor([[0.5, -0.5], [1.0, 2.0]])
        lp = n.log_prob(v)
        lp.sum().backward()
        b = D.Bernoulli(logits=L.tensor([0.3, -1.0]))
        c = D.Bernoulli(probs=0.25)
        return (lp, loc.grad, n.entropy(), n.cdf(v), n.icdf(L.tensor([0.2, 0.9])), n.mean,
                n.stddev, n.variance, n.rsample((3,)).shape, n.batch_shape, b.probs,
                b.log_prob(L.tensor([1.0, 0.0])), b.entropy(), b.variance, c.batch_shape,
                c.log_prob(L.tensor(1.0)), D.Normal(0.0, 1.0).batch_shape)
    _same(fn)


def test_kl_divergence():
    def fn(L):
        D = L.distributions
        return (D.kl_divergence(D.Normal(L.tensor([0.0, 1.0]), 2.0),
                                D.Normal(1.0, L.tensor([1.0, 3.0]))),
                D.kl_divergence(D.Categorical(probs=L.tensor(P)),
                                D.Categorical(logits=L.tensor([0.1, 0.2, 0.3]))),
                D.kl_divergence(D.Bernoulli(probs=L.tensor([0.2, 0.0])),
                                D.Bernoulli(probs=L.tensor([0.5, 0.5]))))
    _same(fn)


@pytest.mark.parametrize("make", [
    lambda L: L.distributions.Categorical(probs=L.tensor([[-0.1, 1.1]])),
    lambda L: L.distributions.Categorical(probs=L.tensor(P)).log_prob(L.tensor([3, 0])),
    lambda L: L.distributions.Categorical(probs=L.tensor(P)).log_prob(L.tensor([0, 0, 0])),
    lambda L: L.distributions.Categorical(L.tensor(0.5)),
    lambda L: L.distributions.Categorical(),
    lambda L: L.distributions.Normal(0.0, L.tensor([1.0, -1.0])),
    lambda L: L.distributions.Bernoulli(probs=L.tensor([1.5])),
    lambda L: L.distributions.kl_divergence(L.distributions.Normal(0.0, 1.0),
                                            L.distributions.Bernoulli(0.5)),
])
def test_validation_errors(make):
    errors = []
    for L in (torch, llgrad):
        with pytest.raises(Exception) as e:
            make(L)
        errors.append((type(e.value), str(e.value).replace("torch.", "").replace("llgrad.", "")))
    assert errors[1] == errors[0]


def test_size_arithmetic_stays_a_size():
    for L in (torch, llgrad):
        s = L.Size([2, 3])
        for v in (s[1:], s + (4,), (1,) + s, s * 2, 2 * s, L.zeros(2, 3).shape[:1]):
            assert type(v) is L.Size, v
        assert s[0] == 2 and type(s[0]) is int


def test_categorical_inside_compile():
    """A policy step: sample, log_prob (validated: value guards) and entropy compiled; the
    draws are eager's (same seed, same actions) and the gradients too."""
    def run(compiled):
        llgrad.manual_seed(3)
        lin = llgrad.nn.Linear(4, 3)
        with llgrad.no_grad():
            lin.weight.copy_(llgrad.tensor(np.arange(12.0, dtype=np.float32).reshape(3, 4) / 10))
            lin.bias.zero_()

        def step(x):
            m = llgrad.distributions.Categorical(logits=lin(x))
            action = m.sample()
            loss = -(m.log_prob(action) + 0.01 * m.entropy()).sum()
            lin.zero_grad()
            loss.backward()
            return action, loss
        f = llgrad.compile(step) if compiled else step
        x = llgrad.tensor(np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4))
        out = []
        for _ in range(3):
            action, loss = f(x)
            out += [action.numpy().copy(), loss.item(), lin.weight.grad.numpy().copy()]
        return out, f
    want, _ = run(False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got, f = run(True)
    assert f.entries, "no compiled code"
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-6)
