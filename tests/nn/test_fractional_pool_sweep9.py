"""Sweep 9: nn.FractionalMaxPool2d / 3d and F.fractional_max_pool2d / 3d (missing before),
against torch: the same seeded modules and inputs give the same outputs, indices, grad_fn
names, gradients, generator state and errors; a compiled training step gives eager's."""
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402
from oracle_sweep8 import check  # noqa: E402

_RNG = np.random.default_rng(0)
_X = _RNG.standard_normal((2, 3, 9, 7)).astype(np.float32)
_X3 = _RNG.standard_normal((2, 2, 6, 7, 5)).astype(np.float32)


@pytest.mark.parametrize("kw", [
    {"kernel_size": 2, "output_size": 4}, {"kernel_size": 3, "output_size": (5, 3)},
    {"kernel_size": (2, 3), "output_ratio": (0.5, 0.6)}, {"kernel_size": 2, "output_size": 1},
    {"kernel_size": 2, "output_size": (8, 6), "return_indices": True}])
def test_fractional_max_pool2d_as_torch(kw):
    check(lambda lib: lib.nn.FractionalMaxPool2d(**kw), [_X], tol=1e-5)
    check(lambda lib: lib.nn.FractionalMaxPool2d(**kw), [_X[0].astype(np.float64)], tol=1e-5)


def test_fractional_max_pool_ties_nans_and_given_samples_as_torch():
    x = np.round(_X * 2) / 2
    x[0, 0, 1, 1] = x[0, 0, 1, 2] = np.nan
    x[1, 1] = -np.inf
    check(lambda lib: lib.nn.FractionalMaxPool2d(3, output_size=4, return_indices=True), [x])
    u = np.random.default_rng(1).random((2, 3, 2)).astype(np.float32)
    check(lambda lib: lib.nn.FractionalMaxPool2d(2, output_size=4,
                                                 _random_samples=lib.tensor(u)), [_X])


@pytest.mark.parametrize("kw", [
    {"kernel_size": 2, "output_size": 3}, {"kernel_size": (2, 3, 1), "output_size": (4, 3, 4)},
    {"kernel_size": 2, "output_ratio": 0.5, "return_indices": True}])
def test_fractional_max_pool3d_as_torch(kw):
    check(lambda lib: lib.nn.FractionalMaxPool3d(**kw), [_X3], tol=1e-5)
    check(lambda lib: lib.nn.FractionalMaxPool3d(**kw), [_X3[0]], tol=1e-5)


def _errors(lib):
    F = lib.nn.functional
    x, x3 = lib.randn(2, 3, 7, 6), lib.randn(2, 3, 7, 6, 5)
    out = []
    for f in (
            lambda: F.fractional_max_pool2d(x, 3),
            lambda: F.fractional_max_pool2d(x, 3, output_size=6),
            lambda: F.fractional_max_pool2d(x, 3, output_ratio=(0.5, 0.5, 0.5)),
            lambda: F.fractional_max_pool2d(x, 2, 3, _random_samples=lib.rand(2, 3, 2).double()),
            lambda: F.fractional_max_pool2d(x, 2, 3, _random_samples=lib.rand(1, 3, 2)),
            lambda: F.fractional_max_pool2d(x, 2, 3, _random_samples=lib.rand(2, 3, 3)),
            lambda: F.fractional_max_pool2d(x, 2, 3, _random_samples=lib.rand(2, 4, 2)),
            lambda: F.fractional_max_pool2d(x, 2, 3, _random_samples=lib.rand(3, 2)),
            lambda: F.fractional_max_pool2d(x, (2, 2, 2), output_size=3),
            lambda: F.fractional_max_pool2d(x, 2, output_size=(3, 3, 3)),
            lambda: F.fractional_max_pool2d(x[:, :, :0], 2, output_size=3),
            lambda: F.fractional_max_pool2d(lib.randn(2, 3, 4, 5, 6), 2, output_size=3),
            lambda: F.fractional_max_pool2d(x, 2, output_size=0).shape,
            lambda: lib.nn.FractionalMaxPool2d(2), lambda: lib.nn.FractionalMaxPool2d(2, 3, 0.5),
            lambda: lib.nn.FractionalMaxPool2d(2, output_ratio=1.5),
            lambda: repr(lib.nn.FractionalMaxPool2d(2, output_ratio=0.5)),
            lambda: list(lib.nn.FractionalMaxPool2d(2, 3, _random_samples=lib.ones(1, 1, 2))
                         .state_dict()),
            lambda: F.fractional_max_pool3d(x3, 3),
            lambda: F.fractional_max_pool3d(x3, 3, output_size=5),
            lambda: F.fractional_max_pool3d(x3, 2, output_size=(6, 5, 4)),
            lambda: F.fractional_max_pool3d(x3, (2, 2), output_size=3),
            lambda: F.fractional_max_pool3d(x3[:, :, :0], 2, output_size=3),
            lambda: F.fractional_max_pool3d(lib.randn(2, 3, 4, 5, 6, 7), 2, output_size=3),
            lambda: lib.nn.FractionalMaxPool3d(2, output_ratio=(0.5, 0.5, 1.0))):
        try:
            out.append(str(f()))
        except Exception as e:      # noqa: BLE001 (compared with torch's)
            out.append((type(e).__name__, str(e).split("\n")[0]))
    return str(out).replace("torch", "llgrad")


def test_fractional_max_pool_errors_as_torch():
    assert _errors(llgrad) == _errors(torch)


def _train(compiled):
    lib = llgrad
    lib.manual_seed(0)
    m = lib.nn.Sequential(lib.nn.Linear(9, 8), lib.nn.FractionalMaxPool2d(2, output_ratio=0.6))
    o = lib.optim.SGD(m.parameters(), lr=0.1)
    x = lib.randn(2, 2, 9, 9)

    def step(x):
        o.zero_grad()
        loss = m(x).pow(2).sum()
        loss.backward()
        o.step()
        return loss

    if compiled:
        step = lib.compile(step)
    return [step(x).item() for _ in range(3)] + [lib.rand(1).item()]


def test_fractional_max_pool_compiled_step_as_eager():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _train(True) == _train(False)
