"""Eager max-pooling on kernels built for its shapes (compile/eager_shaped.py): values,
indices and the input's gradient equal NumPy's implementation bit for bit (a maximum and a
store or a sum in the same order), over strides, paddings, dilations, ceil_mode, overlapping
windows, ties, NaN and -inf, float64 and a strided input; and torch's where installed."""
import numpy as np
import pytest

import llgrad
from llgrad.compile import eager_builds, eager_shaped
from llgrad.runtime import dispatch

CASES = [  # input shape, kernel, stride, padding, dilation, ceil_mode
    ((32, 16, 32, 32), 2, 2, 0, 1, False),
    ((8, 16, 33, 31), 3, 2, 1, 1, True),            # overlapping windows, ceil_mode
    ((4, 8, 48, 46), (3, 2), (1, 2), (1, 0), (2, 1), False),
    ((4, 3, 64, 64), 3, 1, 1, 1, False),             # stride 1: every input in 9 windows
    ((16, 64, 8, 8), 2, 2, 0, 1, False),
]


def _native(fn):
    """fn() (a run on the shaped kernels), and how many of them ran: built first, by a call
    of its own (LLGRAD_COMPILE=background: that call queues the builds and runs NumPy's)."""
    fn()
    eager_builds.wait()
    before = eager_shaped.stats["calls"]
    out = fn()
    return out, eager_shaped.stats["calls"] - before


def _input(shape, dtype, special):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(dtype)
    if special:
        x = np.round(x * 2) / 2                     # many ties in a window
        flat = x.reshape(-1)
        flat[rng.integers(0, flat.size, flat.size // 50)] = np.nan
        flat[rng.integers(0, flat.size, flat.size // 50)] = -np.inf
    return x


def _run(case, native, dtype=np.float32, special=False, strided=False):
    shape, k, s, p, d, ceil = case
    a = _input(shape, dtype, special)
    if strided:             # the last two dims swapped in memory: copied before the kernel
        a = np.ascontiguousarray(a.swapaxes(-1, -2)).swapaxes(-1, -2)
    x = llgrad.tensor(a, requires_grad=True)
    prev = dispatch.set_native_eager(dispatch.native_eager if native else None)
    try:
        y, idx = llgrad.nn.functional.max_pool2d(x, k, s, p, d, ceil, return_indices=True)
        g = np.random.default_rng(1).standard_normal(tuple(y.shape)).astype(dtype)
        y.backward(llgrad.tensor(g))
    finally:
        dispatch.set_native_eager(prev)
    return y.detach().numpy(), idx.numpy(), x.grad.numpy()


@pytest.mark.parametrize("special", [False, True], ids=["plain", "ties-nan-inf"])
@pytest.mark.parametrize("case", CASES, ids=[str(c[0]) for c in CASES])
def test_matches_numpy_exactly(case, special):
    got, ran = _native(lambda: _run(case, True, special=special))
    assert ran == 2, "the shaped kernels did not run"
    want = _run(case, False, special=special)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)


def test_float64_and_strided_input():
    case = CASES[1]
    for kw in ({"dtype": np.float64}, {"strided": True}):
        got, ran = _native(lambda: _run(case, True, special=True, **kw))
        assert ran == 2
        for a, b in zip(got, _run(case, False, special=True, **kw)):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("case", CASES[:3], ids=[str(c[0]) for c in CASES[:3]])
def test_torch(case):
    torch = pytest.importorskip("torch")
    got, _ = _native(lambda: _run(case, True, special=True))
    shape, k, s, p, d, ceil = case
    x = torch.tensor(_input(shape, np.float32, True), requires_grad=True)
    y, idx = torch.nn.functional.max_pool2d(x, k, s, p, d, ceil, return_indices=True)
    g = np.random.default_rng(1).standard_normal(tuple(y.shape)).astype(np.float32)
    y.backward(torch.tensor(g))
    np.testing.assert_array_equal(got[0], y.detach().numpy())
    np.testing.assert_array_equal(got[1], idx.numpy())
    np.testing.assert_allclose(got[2], x.grad.numpy(), rtol=1e-6, atol=1e-6)


def test_small_calls_keep_numpy():
    before = eager_shaped.stats["calls"]
    llgrad.nn.functional.max_pool2d(llgrad.ones(1, 2, 8, 8), 2)
    assert eager_shaped.stats["calls"] == before


AVG_CASES = [  # input shape, kernel, stride, padding, ceil_mode, count_include_pad, divisor
    ((32, 32, 32, 32), 2, 2, 0, False, True, None),
    ((8, 16, 33, 31), 3, 2, 1, True, False, None),   # overlapping, padding not counted
    ((8, 8, 40, 40), (3, 2), (1, 2), (1, 0), False, True, 5),
    ((4, 3, 64, 64), 3, 1, 1, False, True, None),    # stride 1: every input in 9 windows
]


def _run_avg(case, native, dtype=np.float32):
    shape, k, s, p, ceil, cip, div = case
    x = llgrad.tensor(_input(shape, dtype, False), requires_grad=True)
    prev = dispatch.set_native_eager(dispatch.native_eager if native else None)
    try:
        y = llgrad.nn.functional.avg_pool2d(x, k, s, p, ceil, cip, div)
        g = np.random.default_rng(1).standard_normal(tuple(y.shape)).astype(dtype)
        y.backward(llgrad.tensor(g))
    finally:
        dispatch.set_native_eager(prev)
    return y.detach().numpy(), x.grad.numpy()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", AVG_CASES, ids=[str(c[0]) for c in AVG_CASES])
def test_avg_pool_matches_numpy(case, dtype):
    """Native code adds a window's elements in NumPy's order (the same float sums), and
    divides as NumPy's implementation does: equal up to rounding of that division."""
    got, ran = _native(lambda: _run_avg(case, True, dtype))
    assert ran == 2, "the shaped kernels did not run"
    want = _run_avg(case, False, dtype)
    eps = np.finfo(dtype).eps
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=2 * eps, atol=2 * eps * np.abs(b).max())


def test_avg_pool_torch():
    torch = pytest.importorskip("torch")
    for case in AVG_CASES:
        got, _ = _native(lambda: _run_avg(case, True))
        shape, k, s, p, ceil, cip, div = case
        x = torch.tensor(_input(shape, np.float32, False), requires_grad=True)
        y = torch.nn.functional.avg_pool2d(x, k, s, p, ceil, cip, div)
        g = np.random.default_rng(1).standard_normal(tuple(y.shape)).astype(np.float32)
        y.backward(torch.tensor(g))
        np.testing.assert_allclose(got[0], y.detach().numpy(), rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(got[1], x.grad.numpy(), rtol=1e-6, atol=1e-6)
