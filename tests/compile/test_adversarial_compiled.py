"""Compiled calls against eager and PyTorch on the corners of
tests/runtime/test_adversarial_torch.py: PyTorch's order of integer and tensor indices in a
training step, Python ints wrapped into small integer dtypes, integer pow with negative
tensor exponents, bool negation's error, silent empty means, and a second-order
autograd.grad inside the compiled function."""
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402


def _np(t):
    return t.detach().numpy()


def test_mixed_index_training_step_matches_torch():
    w0 = np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 10

    def step(lib, w, opt):
        opt.zero_grad()
        loss = (w[0, :, [1, 3]] * lib.arange(6.).view(3, 2)).sum() + w[1, None, [0, 2]].pow(2).sum()
        loss.backward()
        opt.step()
        return loss

    tw = torch.tensor(w0, requires_grad=True)
    topt = torch.optim.SGD([tw], lr=0.1)
    lw = llgrad.tensor(w0, requires_grad=True)
    lopt = llgrad.optim.SGD([lw], lr=0.1)
    cstep = llgrad.compile(lambda w, o: step(llgrad, w, o))
    for _ in range(3):
        tl = step(torch, tw, topt)
        ll = cstep(lw, lopt)
        np.testing.assert_allclose(_np(ll), _np(tl), rtol=1e-6)
        np.testing.assert_allclose(_np(lw), _np(tw), rtol=1e-6)
        np.testing.assert_allclose(_np(lw.grad), _np(tw.grad), rtol=1e-6)


def test_mixed_index_write_compiled():
    def f(lib, x):
        y = x.clone()
        y[0, :, [1, 3]] = lib.arange(6.).view(3, 2)       # (NumPy's order: (2, 3))
        y[1, None, [0, 2]] = lib.arange(8.).view(1, 2, 4)
        return y
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    c = llgrad.compile(lambda t: f(llgrad, t))
    for _ in range(2):
        np.testing.assert_array_equal(_np(c(llgrad.tensor(x))), _np(f(torch, torch.tensor(x))))


def test_integer_corners_compiled():
    def f(lib, x, e):
        return x.to(lib.int8) + 300, x.to(lib.int8) * 300, x ** e, 2 ** e
    x, e = np.array([1, 2, -1, 0]), np.array([-1, -2, -3, 2])
    c = llgrad.compile(lambda a, b: f(llgrad, a, b))
    want = f(torch, torch.tensor(x), torch.tensor(e))
    for _ in range(2):
        got = c(llgrad.tensor(x), llgrad.tensor(e))
        for g, w in zip(got, want, strict=True):
            assert str(g.dtype).split(".")[-1] == str(w.dtype).split(".")[-1]
            np.testing.assert_array_equal(_np(g), _np(w))


def test_bool_negation_raises_compiled():
    c = llgrad.compile(lambda m: -m)
    with pytest.raises(RuntimeError, match="Negation, the `-` operator, on a bool tensor"):
        c(llgrad.tensor([True, False]))
    with pytest.raises(RuntimeError):
        -torch.tensor([True])


def test_empty_mean_compiled_is_silent_nan():
    c = llgrad.compile(lambda x: (x.mean(0), x.sum(0)))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        for _ in range(2):
            m, s = c(llgrad.zeros(0, 3))
            assert np.isnan(_np(m)).all() and m.shape == (3,)
            np.testing.assert_array_equal(_np(s), np.zeros(3, np.float32))


def test_second_order_grad_inside_compiled_function():
    def f(lib, x):
        g, = lib.autograd.grad((x ** 3).sum(), [x], create_graph=True)
        g2, = lib.autograd.grad(g.sum(), x)
        return g, g2

    x0 = np.array([1.0, 2.0], np.float32)
    tg, tg2 = f(torch, torch.tensor(x0, requires_grad=True))
    c = llgrad.compile(lambda x: f(llgrad, x))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")         # (it may run eagerly, with a warning)
        for _ in range(2):
            g, g2 = c(llgrad.tensor(x0, requires_grad=True))
            assert g.requires_grad
            np.testing.assert_allclose(_np(g), _np(tg))
            np.testing.assert_allclose(_np(g2), _np(tg2))
