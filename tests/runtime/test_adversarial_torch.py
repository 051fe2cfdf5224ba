"""Differential checks against PyTorch of corners a tutorial-style program meets: integer
pow with negative tensor exponents, bool negation, std/var of integers, empty reductions,
0-d squeeze, PyTorch's order of integer and tensor indices, bool and float indices, gather /
scatter bounds, rand of integer dtypes, randint(high, size), reductions with an integer
dtype=, float alpha on integers, `in`, out-of-range Python ints, and silent empty means."""
import warnings
from collections import deque

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import llgrad  # noqa: E402


def _run(lib, fn):
    try:
        return "ok", fn(lib)
    except Exception as e:      # noqa: BLE001 (the exception type is what is compared)
        return "raise", type(e).__name__


def _flat(v):
    if isinstance(v, (tuple, list)):
        return [x for e in v for x in _flat(e)]
    return [v]


def same(fn):
    """fn(lib) in torch and in llgrad: the same values, shapes and dtypes, or the same
    exception type."""
    (tk, tv), (lk, lv) = _run(torch, fn), _run(llgrad, fn)
    assert tk == lk, (tv, lv)
    if tk == "raise":
        assert tv == lv, (tv, lv)
        return
    for t, x in zip(_flat(tv), _flat(lv), strict=True):
        if isinstance(t, torch.Tensor):
            assert isinstance(x, llgrad.Tensor), type(x)
            assert tuple(x.shape) == tuple(t.shape), (x.shape, t.shape)
            assert str(x.dtype).split(".")[-1] == str(t.dtype).split(".")[-1], (x.dtype, t.dtype)
            np.testing.assert_allclose(x.detach().numpy(), t.detach().numpy(), rtol=1e-6,
                                       equal_nan=True)
        elif isinstance(t, torch.dtype):
            assert str(x).split(".")[-1] == str(t).split(".")[-1], (x, t)
        else:
            assert x == t, (x, t)


@pytest.mark.parametrize("fn", [
    lambda L: L.tensor([2, 3, -2, -1, 0, 1, -1]) ** L.tensor([-1, -2, -1, -3, -1, -5, -2]),
    lambda L: 2 ** L.tensor([-1, 2]),
    lambda L: L.tensor([2], dtype=L.int32) ** L.tensor([-1, 3]),
    lambda L: L.tensor([1, 2]) ** -1,                                # (still raises)
    lambda L: -L.tensor([True, False]),
    lambda L: L.neg(L.tensor([True])),
    lambda L: L.tensor([1, 2, 3]).std(),
    lambda L: L.tensor([1, 2, 3]).var(0),
    lambda L: L.std_mean(L.tensor([1, 2])),
])
def test_elementwise_and_moments(fn):
    same(fn)


@pytest.mark.parametrize("fn", [
    lambda L: L.zeros(0).amax(),
    lambda L: L.zeros(0, 2).amax(0),
    lambda L: L.zeros(0, 2).amax(1),
    lambda L: L.zeros(2, 0).amin((0, 1)),
    lambda L: L.zeros(0, 2).max(0),
    lambda L: L.zeros(0, 2).min(-2),
    lambda L: L.zeros(0, 2).max(1)[0],
    lambda L: L.zeros(0).argmax(),
    lambda L: L.zeros(0, 2).argmax(0),
    lambda L: L.zeros(0, 2).argmin(1),
    lambda L: L.zeros(()).squeeze(0),
    lambda L: L.zeros(()).squeeze(-1),
    lambda L: L.zeros(()).squeeze((0,)),
])
def test_empty_and_0d_reductions(fn):
    same(fn)


def test_empty_mean_is_nan_without_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        same(lambda L: (L.zeros(0, 3).mean(0), L.zeros(0).mean(), L.zeros(3, 0).mean(1),
                        L.zeros(0, 2, dtype=L.float64).mean(0, keepdim=True)))


_X = lambda L: L.arange(24).reshape(2, 3, 4)          # noqa: E731


@pytest.mark.parametrize("fn", [
    lambda L: _X(L)[0, :, [1, 3]],                    # NumPy: (2, 3); PyTorch: (3, 2)
    lambda L: _X(L)[1, None, [0, 2]],
    lambda L: _X(L)[-1, ..., [1, 0]],
    lambda L: _X(L)[[1, 0], :, 1],
    lambda L: _X(L)[0, _X(L)[0] > 5],
    lambda L: _X(L)[L.tensor(1), :, [1, 2]],
    lambda L: _X(L)[True],
    lambda L: _X(L)[False],
    lambda L: _X(L)[0, True],
    lambda L: _X(L)[..., True, [1, 2]],
    lambda L: _X(L)[(0, 1), ],
    lambda L: _X(L)[(0, 1), (1, 2)],
    lambda L: L.arange(12).view(3, 4)[1.5],
    lambda L: L.arange(12).view(3, 4)[1, np.float32(1.0)],
    lambda L: L.ones(2, 3).permute(0, 1, 2),          # (the length error, not a dim one)
])
def test_getitem_order(fn):
    same(fn)


def test_list_of_sequences_is_a_tuple_index():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        same(lambda L: L.arange(12).view(3, 4)[[[0, 1], [2, 0]]])
        same(lambda L: L.arange(12).view(3, 4)[[0, slice(None)]])
    with pytest.warns(UserWarning, match="non-tuple sequence"):
        llgrad.arange(12).view(3, 4)[[[0, 1], [2, 0]]]


def _set(idx, value):
    def fn(L):
        x = L.arange(24.).reshape(2, 3, 4)
        x[idx(x) if callable(idx) else idx] = value
        return x
    return fn


@pytest.mark.parametrize("fn", [
    _set((0, slice(None), [1, 3]), -1.0),
    _set((1, None, [0, 2]), -1.0),
    _set(lambda x: (1, x[1] > 15), 0.0),
    _set(True, 3.0),
])
def test_setitem_order(fn):
    same(fn)


def test_mixed_index_grad():
    def fn(L):
        x = L.arange(24.).reshape(2, 3, 4).requires_grad_()
        y = x[0, :, [1, 3]]
        (y * L.arange(6.).view(3, 2)).sum().backward()
        z = L.arange(24.).reshape(2, 3, 4).requires_grad_()
        w = z * 1
        w[0, :, [1, 3]] = 0
        w.sum().backward()
        return y, x.grad, z.grad
    same(fn)


@pytest.mark.parametrize("fn", [
    lambda L: L.arange(12.).view(3, 4).gather(1, L.tensor([[-1]])),
    lambda L: L.arange(12.).view(3, 4).gather(1, L.tensor([[4]])),
    lambda L: L.zeros(3, 4).scatter(1, L.tensor([[-1]]), 1.0),
    lambda L: L.zeros(3, 4).scatter_add(1, L.tensor([[-1]]), L.ones(1, 1)),
    lambda L: L.zeros(3, 4).scatter_reduce(1, L.tensor([[4]]), L.ones(1, 1), "sum"),
    lambda L: L.zeros(3, 4).index_select(1, L.tensor([-1])),
    lambda L: L.zeros(3, 4).index_select(1, L.tensor([4])),
    lambda L: L.zeros(4, 3).index_select(0, L.tensor([4])),
    lambda L: L.zeros(2, 3, 4).index_select(2, L.tensor([-5])),
    lambda L: L.arange(12.).view(3, 4).gather(1, L.tensor([[3, 0]])),
])
def test_index_bounds(fn):
    same(fn)


@pytest.mark.parametrize("fn", [
    lambda L: L.rand(2, dtype=L.int32),
    lambda L: L.randn(2, dtype=L.int64),
    lambda L: L.rand_like(L.zeros(2, dtype=L.int64)),
    lambda L: L.randn_like(L.zeros(2, dtype=L.int64)),
    lambda L: L.randint(5, (3,)).shape,
    lambda L: L.randint(5, (3,)).dtype,
    lambda L: L.randint(high=5, size=(2,)).shape,
])
def test_random_dtypes_and_signatures(fn):
    same(fn)


@pytest.mark.parametrize("fn", [
    lambda L: L.tensor([1, 2]).sum(dtype=L.int8),
    lambda L: L.tensor([[1, 2], [3, 4]]).sum(1, dtype=L.int16),
    lambda L: L.tensor([1, 2]).prod(dtype=L.int8),
    lambda L: L.tensor([1, 2]).cumsum(0, dtype=L.int8),
    lambda L: L.cumprod(L.tensor([1, 2]), 0, dtype=L.int8),
    lambda L: L.tensor([1, 2]).add(1, alpha=0.5),
    lambda L: L.tensor([1, 2]).sub_(1, alpha=0.5),
    lambda L: (L.tensor([1, 2]).add(1.0, alpha=0.5), L.tensor([1, 2]).add(1, alpha=3),
               L.tensor([1]).add(L.tensor([1.0]), alpha=0.5)),
    lambda L: (L.tensor([1], dtype=L.int8) + 300, L.tensor([1], dtype=L.uint8) + 256,
               L.tensor([100], dtype=L.int8) * 300, L.tensor([1], dtype=L.int16) + 100000,
               L.tensor([1], dtype=L.int8).add_(300)),
    lambda L: (2 in L.tensor([1, 2]), 5 in L.tensor([1, 2]),
               L.tensor([1, 2]) in L.tensor([[1, 2], [3, 4]])),
    lambda L: "a" in L.tensor([1]),
])
def test_dtype_arguments_and_scalars(fn):
    same(fn)


@pytest.mark.parametrize("fn", [
    lambda L: L.autograd.functional.jacobian(lambda a: a ** 2, L.tensor([1.0, 2.0])),
    lambda L: L.autograd.functional.jacobian(lambda a, b: (a * b, a.sum()),
                                             (L.tensor([1.0, 2.0]), L.tensor([3.0, 4.0]))),
    lambda L: L.autograd.functional.hessian(lambda a: (a ** 3).sum(), L.tensor([1.0, 2.0])),
    lambda L: L.autograd.functional.hessian(lambda a, b: (a * a * b).sum(),
                                            (L.tensor([1.0, 2.0]), L.tensor([3.0, 4.0]))),
    lambda L: L.autograd.grad((L.ones(2, requires_grad=True) * 2).sum(), []),
])
def test_autograd_functional_and_grad_arguments(fn):
    same(fn)


def test_anomaly_mode_switches():
    def fn(L):
        # (torch.is_anomaly_enabled; llgrad has it in llgrad.autograd)
        enabled = L.is_anomaly_enabled if L is torch else L.autograd.is_anomaly_enabled
        x = L.tensor([1.0, 2.0], requires_grad=True)
        seen = [enabled()]
        with L.autograd.set_detect_anomaly(True):
            seen.append(enabled())
            (x * x).sum().backward()
        seen.append(enabled())
        with L.autograd.detect_anomaly():
            seen.append(enabled())
        L.autograd.set_detect_anomaly(True)
        seen.append(enabled())
        L.autograd.set_detect_anomaly(False)
        return x.grad, seen
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")         # (PyTorch warns that anomaly mode is slow)
        same(fn)


@pytest.mark.parametrize("fn", [
    lambda L: L.tensor(deque([1.0, 2.5])),                         # REINFORCE's returns
    lambda L: L.tensor(range(3)),
    lambda L: L.tensor(deque([L.tensor(1.0), L.tensor(2.0)])),
    lambda L: L.tensor([deque([1, 2]), deque([3, 4])]),
])
def test_tensor_of_any_python_sequence(fn):
    same(fn)
