"""The functions that draw from the global generator: F.gumbel_softmax and the randomised
leaky ReLU (F.rrelu, F.rrelu_, torch.rrelu / rrelu_, nn.RReLU). Draws are llgrad's stream,
not PyTorch's, so they are compared by their distributions (Gumbel-max sampling frequencies
equal softmax(logits); the slopes uniform on [lower, upper]) and by the structure of the
gradients (straight through for hard samples; the drawn slope, or 1); evaluation mode,
errors and reprs against torch; reproducibility under manual_seed; compiled == eager with
the same seed (the draw is a random op that compiled calls replay)."""
import warnings

import numpy as np
import pytest

import llgrad
import llgrad.nn as nn
import llgrad.nn.functional as F


def _torch():
    return pytest.importorskip("torch")


LOGITS = np.log(np.array([0.5, 0.25, 0.15, 0.1]))


def test_gumbel_softmax_hard_samples_follow_softmax():
    llgrad.manual_seed(0)
    logits = llgrad.tensor(np.tile(LOGITS, (20000, 1)))
    y = F.gumbel_softmax(logits, tau=0.7, hard=True).numpy()
    assert set(np.unique(y)) == {0.0, 1.0} and np.array_equal(y.sum(1), np.ones(20000))
    freq = y.mean(0)
    np.testing.assert_allclose(freq, np.exp(LOGITS), atol=0.015)
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    ref = torch.nn.functional.gumbel_softmax(torch.tensor(np.tile(LOGITS, (20000, 1))), tau=0.7,
                                             hard=True).numpy().mean(0)
    np.testing.assert_allclose(freq, ref, atol=0.02)


def test_gumbel_softmax_soft_statistics_match_torch():
    """Soft samples: on the simplex, their mean and spread (a function of tau) as torch's."""
    torch = _torch()
    logits = np.tile(LOGITS, (20000, 1))
    stats = []
    for lib in (llgrad, torch):
        lib.manual_seed(1)
        y = lib.nn.functional.gumbel_softmax(lib.tensor(logits), tau=2.0, dim=1).numpy()
        np.testing.assert_allclose(y.sum(1), 1.0, rtol=1e-12)
        stats.append((y.mean(0), y.std(0)))
    np.testing.assert_allclose(stats[0][0], stats[1][0], atol=0.01)
    np.testing.assert_allclose(stats[0][1], stats[1][1], atol=0.01)


def test_gumbel_softmax_straight_through_gradient():
    """hard=True: the forward is one-hot, the gradient is the soft sample's (y_hard - y_soft
    .detach() + y_soft), computed here from the same draw replayed with the same seed."""
    logits = llgrad.tensor(np.tile(LOGITS, (3, 1)), requires_grad=True)
    cot = llgrad.tensor(np.random.default_rng(2).standard_normal((3, 4)))
    llgrad.manual_seed(5)
    hard = F.gumbel_softmax(logits, tau=0.5, hard=True)
    (g_hard,) = llgrad.autograd.grad((hard * cot).sum(), logits)
    llgrad.manual_seed(5)
    soft = F.gumbel_softmax(logits, tau=0.5)
    (g_soft,) = llgrad.autograd.grad((soft * cot).sum(), logits)
    np.testing.assert_array_equal(hard.detach().numpy().argmax(1), soft.detach().numpy().argmax(1))
    np.testing.assert_allclose(g_hard.numpy(), g_soft.numpy(), rtol=1e-12)
    assert type(hard.grad_fn).__name__ == "AddBackward0"


def test_gumbel_softmax_dim_eps_and_dtype_errors():
    torch = _torch()
    x = llgrad.randn(4, 3, 5)
    y = F.gumbel_softmax(x, dim=1)
    np.testing.assert_allclose(y.sum(1).numpy(), 1.0, rtol=1e-6)
    with pytest.warns(UserWarning, match="`eps` parameter is deprecated and has no effect."):
        F.gumbel_softmax(x, eps=1e-3)
    msgs = []
    for lib in (llgrad, torch):
        with pytest.raises(RuntimeError) as info:
            lib.nn.functional.gumbel_softmax(lib.tensor([1, 2, 3]))
        msgs.append(str(info.value))
    assert msgs[0] == msgs[1]


def test_rrelu_training_slopes_are_uniform_and_are_the_gradient():
    llgrad.manual_seed(3)
    x = llgrad.tensor(-np.abs(np.random.default_rng(0).standard_normal(50000)) - 0.01,
                      requires_grad=True)
    y = F.rrelu(x, 0.1, 0.4, training=True)
    slope = (y / x).detach().numpy()
    assert slope.min() >= 0.1 and slope.max() <= 0.4
    assert abs(slope.mean() - 0.25) < 0.003 and abs(slope.var() - 0.3 ** 2 / 12) < 0.0005
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), slope, rtol=1e-12)
    # positive elements pass unchanged with gradient 1; zero stays zero
    p = llgrad.tensor([0.0, 1.5, 2.0], requires_grad=True)
    out = F.rrelu(p, training=True)
    out.sum().backward()
    assert out.detach().tolist() == [0.0, 1.5, 2.0]
    assert p.grad.tolist()[1:] == [1.0, 1.0] and 1 / 8 <= p.grad.tolist()[0] <= 1 / 3


def test_rrelu_slopes_match_torch_statistics():
    torch = _torch()
    x = -np.ones(40000)
    stats = []
    for lib in (llgrad, torch):
        lib.manual_seed(0)
        s = -lib.nn.functional.rrelu(lib.tensor(x), training=True).numpy()
        stats.append((s.min(), s.max(), s.mean(), s.std()))
    np.testing.assert_allclose(stats[0], stats[1], atol=0.003)


def test_rrelu_eval_and_module_match_torch():
    torch = _torch()
    x = np.random.default_rng(1).standard_normal((4, 5))
    x[0, 0] = 0.0
    res = []
    for lib in (llgrad, torch):
        t = lib.tensor(x, requires_grad=True)
        m = lib.nn.RReLU(0.1, 0.3).eval()
        y = m(t) + lib.nn.functional.rrelu(t) + lib.rrelu(t, 0.2, 0.5)
        y.sum().backward()
        res.append((y.detach().numpy(), t.grad.numpy(), repr(m),
                    repr(lib.nn.RReLU(inplace=True))))
    np.testing.assert_allclose(res[0][0], res[1][0], rtol=1e-12)
    np.testing.assert_allclose(res[0][1], res[1][1], rtol=1e-12)
    assert res[0][2:] == res[1][2:]


def test_rrelu_inplace_and_errors():
    torch = _torch()
    llgrad.manual_seed(0)
    x = llgrad.randn(100)
    base = x.clone()
    out = F.rrelu(x, training=True, inplace=True)
    assert out is x
    neg = base.numpy() < 0
    assert np.array_equal(x.numpy()[~neg], base.numpy()[~neg])
    ratio = x.numpy()[neg] / base.numpy()[neg]
    assert ratio.min() >= 1 / 8 and ratio.max() <= 1 / 3
    y = llgrad.randn(10)
    ref = F.leaky_relu(y, 0.3)
    assert F.rrelu_(y, 0.2, 0.4) is y
    np.testing.assert_allclose(y.numpy(), ref.numpy(), rtol=1e-6)
    g = llgrad.Generator().manual_seed(4)
    a = llgrad.rrelu(-llgrad.ones(5), training=True, generator=g)
    g.manual_seed(4)
    b = llgrad.rrelu_(-llgrad.ones(5), training=True, generator=g)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    cases = [lambda L: L.nn.functional.rrelu(L.randn(3), 0.5, 0.2),
             lambda L: L.nn.functional.rrelu(L.randn(3), 0.5, 0.2, True),
             lambda L: L.nn.functional.rrelu(L.tensor([1, 2]), training=True),
             lambda L: L.nn.functional.rrelu(L.tensor([1, 2])),
             lambda L: L.nn.functional.rrelu(L.randn(3, requires_grad=True), inplace=True,
                                             training=True)]
    for case in cases:
        msgs = []
        for lib in (llgrad, torch):
            with pytest.raises(Exception) as info:
                case(lib)
            msgs.append((info.type.__name__, str(info.value)))
        assert msgs[0] == msgs[1]


def test_same_seed_same_draws():
    out = []
    for _ in range(2):
        llgrad.manual_seed(11)
        out.append((F.gumbel_softmax(llgrad.zeros(3, 4)).numpy(),
                    F.rrelu(-llgrad.ones(6), training=True).numpy()))
    for a, b in zip(*out):
        np.testing.assert_array_equal(a, b)


def test_compiled_equals_eager():
    logits = llgrad.tensor(np.random.default_rng(4).standard_normal((6, 5)).astype(np.float32),
                           requires_grad=True)
    act = nn.RReLU(0.1, 0.3)

    def loss(logits):
        y = F.gumbel_softmax(act(logits), tau=0.5, hard=True)
        s = F.gumbel_softmax(logits, tau=2.0)
        return (y * logits).sum() + (s * s).sum() + F.rrelu(logits, training=True).sum()

    results = []
    for fn in (loss, llgrad.compile(loss)):
        llgrad.manual_seed(9)
        values = []
        for _ in range(3):
            logits.grad = None
            with warnings.catch_warnings():
                warnings.simplefilter("error")          # no graph break
                value = fn(logits)
            value.backward()
            values.append(value.item())
        results.append((values, logits.grad.numpy().copy(), llgrad.rand(2).numpy()))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-5)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(results[0][2], results[1][2])     # the generator's state
