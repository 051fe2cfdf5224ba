"""Gamma, Dirichlet, Poisson and Binomial draws as PyTorch's CPU kernels make them
(llgrad/ir/torch_gamma.py): for a seed, the samples of Gamma, Beta, Dirichlet, Chi2,
StudentT, FisherSnedecor, Poisson, NegativeBinomial and Binomial and torch.poisson's and
torch.binomial's equal torch's bit for bit, alpha below 1 (the boost) and a kept Box-Muller value included, and
the generator is left where torch leaves it; rsample's gradients are torch's; a compiled
function drawing them (mixup's Beta) equals eager across calls; float16 is refused."""
import numpy as np
import pytest

import llgrad
from llgrad.ir import torch_gamma, torch_random

torch = pytest.importorskip("torch")

ALPHAS = [0.3, 2.0, 0.5, 7.5, 1.0, 0.05, 100.0, 1e-3, 0.0, 3.25]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("seed", [0, 5])
def test_standard_gamma_is_torchs(dtype, seed):
    a = np.asarray(ALPHAS * 3, dtype)
    torch.manual_seed(seed)
    torch.randn(3, dtype=torch.float64)         # (a Box-Muller value kept for the next draw)
    want = torch._standard_gamma(torch.tensor(a)).numpy()
    after = torch.rand(4, dtype=torch.float64).numpy()
    state = torch_random.seeded(seed)
    torch_random.normal(state, 3, "float64", contiguous=False)
    got = torch_gamma.standard_gamma(state, a)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(torch_random.uniform(state, 4, "float64"), after)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dirichlet_is_torchs(dtype):
    a = np.asarray(ALPHAS[:9], dtype).reshape(3, 3) + dtype(0.01)
    torch.manual_seed(3)
    want = torch._sample_dirichlet(torch.tensor(a)).numpy()
    after = torch.rand(2).numpy()
    state = torch_random.seeded(3)
    np.testing.assert_array_equal(torch_gamma.dirichlet(state, a), want)
    np.testing.assert_array_equal(torch_random.uniform(state, 2, "float32"), after)


def _samples(lib):
    D = lib.distributions
    c = lib.tensor([0.4, 2.0, 5.0])
    out = []
    lib.manual_seed(11)
    for d in (D.Gamma(c, lib.tensor([1.0, 0.5, 2.0])), D.Beta(c, c.flip(0)),
              D.Dirichlet(lib.stack([c, c + 1])), D.Chi2(c), D.StudentT(c),
              D.FisherSnedecor(c, c + 1), D.Poisson(c * 7), D.NegativeBinomial(c, probs=0.4),
              D.Binomial(lib.tensor([5.0, 40.0, 300.0]), probs=lib.tensor([0.3, 0.6, 0.95]))):
        out.append(d.sample((4,)).numpy())
    return out


def test_distributions_sample_torchs_numbers():
    for got, want in zip(_samples(llgrad), _samples(torch)):
        np.testing.assert_array_equal(got, want)


def test_rsample_gradients_are_torchs():
    grads = []
    for lib in (torch, llgrad):
        lib.manual_seed(2)
        c = lib.tensor([0.7, 1.5, 4.0], requires_grad=True)
        x = lib.distributions.Gamma(c, 2.0).rsample((5,))
        y = lib.distributions.Dirichlet(lib.stack([c, c * 2])).rsample()
        (x.sum() + (y * lib.arange(3.0)).sum()).backward()
        grads.append((x.detach().numpy(), y.detach().numpy(), c.grad.numpy()))
    for a, b in zip(*grads):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)


def test_a_compiled_mixup_step_equals_eager_and_torch():
    def make(lib):
        lib.manual_seed(0)
        m = lib.nn.Linear(4, 2)
        beta = lib.distributions.Beta(lib.tensor([0.4]), lib.tensor([0.4]))

        def step(x, y):
            lam = beta.sample()
            perm = lib.randperm(x.shape[0])
            out = m(lam * x + (1 - lam) * x[perm])
            loss = (lam * (out - y) ** 2).mean() + (1 - lam) * ((out - y[perm]) ** 2).mean()
            return loss, lam
        return step
    x, y = np.random.default_rng(0).standard_normal((2, 8, 4)).astype(np.float32)
    y = y[:, :2]
    runs = {}
    for name, lib, compiled in (("torch", torch, False), ("eager", llgrad, False),
                                ("compiled", llgrad, True)):
        step = make(lib)
        step = llgrad.compile(step) if compiled else step
        losses = []
        for k in range(4):
            lib.manual_seed(k)
            loss, lam = step(lib.tensor(x), lib.tensor(y))
            losses.append((loss.item(), lam.item()))
        runs[name] = np.array(losses)
    # the draws bit for bit; the losses to rounding (the compiled sums' own order)
    np.testing.assert_array_equal(runs["eager"][:, 1], runs["compiled"][:, 1])
    np.testing.assert_array_equal(runs["eager"][:, 1], runs["torch"][:, 1])
    np.testing.assert_allclose(runs["eager"][:, 0], runs["compiled"][:, 0], rtol=1e-6)
    np.testing.assert_allclose(runs["eager"][:, 0], runs["torch"][:, 0], rtol=1e-6)


def test_float16_is_refused_as_torch_refuses_it():
    for lib in (torch, llgrad):
        with pytest.raises((RuntimeError, NotImplementedError), match="gamma_cpu"):
            lib._standard_gamma(lib.tensor([1.0], dtype=lib.float16))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_poisson_is_torchs(dtype):
    """Both of ATen's branches (below rate 10 and from it), a zero and an infinite rate."""
    rates = np.asarray([0.3, 2.0, 0.0, 7.5, 10.0, 15.5, 100.0, 1e4, np.inf, 1e-3] * 10, dtype)
    torch.manual_seed(4)
    want = torch.poisson(torch.tensor(rates)).numpy()
    after = torch.rand(2).numpy()
    llgrad.manual_seed(4)
    got = llgrad.poisson(llgrad.tensor(rates)).numpy()
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(llgrad.rand(2).numpy(), after)
    for lib in (torch, llgrad):
        with pytest.raises(RuntimeError, match="non-negative"):
            lib.poisson(lib.tensor([1.0, float("nan")]))


def test_a_compiled_poisson_replays_eagers_draws():
    f = llgrad.compile(lambda r: llgrad.poisson(r) * 2)
    for k in range(3):
        llgrad.manual_seed(k)
        got = f(llgrad.tensor([3.0, 20.0, 0.5]))
        llgrad.manual_seed(k)
        want = llgrad.poisson(llgrad.tensor([3.0, 20.0, 0.5])) * 2
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert f.n_traces == 1


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_binomial_is_torchs(dtype):
    """Inversion and BTRS, p on both sides of 1/2, the edges (count 0, p 0 and 1)."""
    rng = np.random.default_rng(8)
    n = np.concatenate([rng.integers(0, 200, 150), [0, 5, 1000, 10**6, 7]]).astype(dtype)
    p = np.concatenate([rng.uniform(0, 1, 150), [0.3, 0.0, 1.0, 0.4, 0.93]]).astype(dtype)
    torch.manual_seed(6)
    want = torch.binomial(torch.tensor(n), torch.tensor(p)).numpy()
    after = torch.rand(2).numpy()
    llgrad.manual_seed(6)
    got = llgrad.binomial(llgrad.tensor(n), llgrad.tensor(p)).numpy()
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(llgrad.rand(2).numpy(), after)
