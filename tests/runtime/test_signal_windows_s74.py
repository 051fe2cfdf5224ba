"""torch.signal.windows (s74): llgrad.signal.windows' eleven windows against PyTorch's
(symmetric and periodic, float32 and float64, the lengths 0 and 1), their errors, and a window
made inside a compiled function. Before, `llgrad.signal` did not exist (AttributeError)."""
import warnings

import numpy as np
import pytest

import llgrad

KWARGS = {"general_cosine": {"a": [0.46, 0.23, 0.31]}, "exponential": {"tau": 2.0},
          "gaussian": {"std": 1.7}, "kaiser": {"beta": 6.0}, "general_hamming": {"alpha": 0.6}}
NAMES = ["bartlett", "blackman", "cosine", "exponential", "gaussian", "general_cosine",
         "general_hamming", "hamming", "hann", "kaiser", "nuttall"]


def test_namespace():
    assert sorted(llgrad.signal.windows.__all__) == NAMES
    assert llgrad.signal.__all__ == ["windows"]


def test_known_values():      # (SciPy's: symmetric by default, periodic with sym=False)
    W = llgrad.signal.windows
    np.testing.assert_allclose(W.hann(5).numpy(), [0, 0.5, 1, 0.5, 0], atol=1e-7)
    np.testing.assert_allclose(W.hann(4, sym=False).numpy(), [0, 0.5, 1, 0.5], atol=1e-7)
    np.testing.assert_allclose(W.bartlett(5).numpy(), [0, 0.5, 1, 0.5, 0], atol=1e-7)
    assert W.hann(5).dtype == llgrad.float32 and W.hann(1).tolist() == [1.0]
    assert W.gaussian(0).shape == (0,) and W.kaiser(3, dtype=llgrad.float64).dtype == llgrad.float64


@pytest.mark.parametrize("name", NAMES)
def test_against_torch(name):
    torch = pytest.importorskip("torch")
    for M in (0, 1, 2, 5, 8, 33):
        for sym in (True, False):
            for dt in ("float32", "float64"):
                want = getattr(torch.signal.windows, name)(
                    M, sym=sym, dtype=getattr(torch, dt), **KWARGS.get(name, {})).numpy()
                got = getattr(llgrad.signal.windows, name)(
                    M, sym=sym, dtype=getattr(llgrad, dt), **KWARGS.get(name, {})).numpy()
                assert got.dtype == want.dtype and got.shape == want.shape, (name, M, sym, dt)
                np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7,
                                           err_msg=f"{name} M={M} sym={sym} {dt}")


@pytest.mark.parametrize("call, kind, message", [
    (lambda W: W.exponential(4, center=1.0), ValueError, "Center must be None"),
    (lambda W: W.gaussian(4, std=0), ValueError, "Standard deviation must be positive"),
    (lambda W: W.kaiser(4, beta=-1), ValueError, "beta must be non-negative"),
    (lambda W: W.cosine(-1), ValueError, "requires non-negative window length, got M=-1"),
    (lambda W: W.hann(4, dtype=llgrad.float16), ValueError, "expects float32 or float64"),
    (lambda W: W.general_cosine(4, a=[]), ValueError, "Coefficients cannot be empty"),
    (lambda W: W.general_cosine(4, a=3), TypeError, "Coefficients must be a list/tuple")])
def test_errors(call, kind, message):
    with pytest.raises(kind, match=message):
        call(llgrad.signal.windows)


def test_requires_grad_and_periodic_center():
    W = llgrad.signal.windows
    w = W.exponential(6, center=1.0, sym=False, requires_grad=True)
    assert w.requires_grad
    np.testing.assert_allclose(w.detach().numpy(), np.exp(-np.abs(np.arange(6) - 1.0)),
                               rtol=1e-6)


def test_window_inside_compiled_step():
    lin = llgrad.nn.Linear(8, 8)

    def step(x):
        w = llgrad.signal.windows.hann(8) * llgrad.signal.windows.gaussian(8, std=2.0)
        loss = (lin(x * w) ** 2).mean()
        loss.backward()
        return loss.detach()
    x = llgrad.ones(3, 8)
    want = step(x)
    grad = lin.weight.grad.clone()
    lin.weight.grad = None
    lin.bias.grad = None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = llgrad.compile(step)(x)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
    np.testing.assert_allclose(lin.weight.grad.numpy(), grad.numpy(), rtol=1e-6)
