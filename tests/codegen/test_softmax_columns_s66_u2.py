"""softmax / log_softmax over a dim that is not the innermost, the inner kept positions unit
stride (codegen/lowerings/ops_norm_columns.py: the statistics of all inner positions kept at
once, the passes vectorised along them), compiled against torch and eager llgrad: shapes at
and past the inner limit, float32 and float64, -inf and NaN in a column, a layout that keeps
the row form, 1-3 threads, and cross_entropy of (N, C, H, W) scores with its gradient."""
import numpy as np
import pytest

import llgrad
from llgrad.codegen.lowerings.ops_norm_columns import MAX_INNER

torch = pytest.importorskip("torch")


def _both(fn, x):
    want = fn(torch, torch.tensor(x)).numpy()
    eager = fn(llgrad, llgrad.tensor(x)).numpy()
    cf = llgrad.compile(lambda t: fn(llgrad, t))
    for _ in range(2):          # (a first call may run eagerly: the second runs native code)
        got = cf(llgrad.tensor(x)).numpy()
    assert cf.n_traces == 1
    return want, eager, got


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
@pytest.mark.parametrize("shape,dim,dtype", [((2, 5, 3, 4), 1, "float32"), ((7, 6), 0, "float64"),
                                             ((2, 3, 4, 5), 0, "float32"),
                                             ((2, 3, MAX_INNER + 1), 1, "float32"),
                                             ((2, 3, MAX_INNER), 1, "float64")])
def test_matches_torch(op, shape, dim, dtype):
    x = (np.random.default_rng(0).standard_normal(shape) * 4).astype(dtype)
    want, eager, got = _both(lambda lib, t: getattr(lib, op)(t * 1, dim), x)
    tol = 1e-6 if dtype == "float32" else 1e-13
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    np.testing.assert_allclose(got, eager, rtol=tol, atol=tol)


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_infinities_and_nan_in_a_column(op):
    x = np.random.default_rng(1).standard_normal((2, 4, 6)).astype(np.float32)
    x[0, :, 1] = -np.inf            # (a column all -inf: NaN, as torch gives)
    x[0, 2, 2] = -np.inf
    x[1, 1, 3] = np.inf
    x[1, 3, 4] = np.nan
    want, eager, got = _both(lambda lib, t: getattr(lib, op)(t + 0, 1), x)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6, equal_nan=True)
    np.testing.assert_allclose(got, eager, rtol=1e-6, atol=1e-6, equal_nan=True)


def test_channels_last_view_keeps_rows():
    # (the reduced dim is the unit-stride one: ops_norm's rows, unchanged)
    x = np.random.default_rng(2).standard_normal((2, 3, 4, 5)).astype(np.float32)
    want, eager, got = _both(lambda lib, t: lib.log_softmax(t.permute(0, 3, 1, 2) * 1, 1), x)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_cross_entropy_of_image_scores_and_its_gradient():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 16, 5, 6)).astype(np.float32)
    target = rng.integers(0, 16, (2, 5, 6))

    def step(lib, compiled):
        xs = lib.tensor(x, requires_grad=True)
        fn = lambda: lib.nn.functional.cross_entropy(xs * 2, lib.tensor(target))  # noqa: E731
        cf = llgrad.compile(fn) if compiled else fn
        for _ in range(2):      # (the second call runs native code)
            xs.grad = None
            loss = cf()
            loss.backward()
        assert not compiled or cf.n_traces == 1
        return loss.item(), xs.grad.numpy()

    want = step(torch, False)
    for got in (step(llgrad, False), step(llgrad, True)):
        np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
        np.testing.assert_allclose(got[1], want[1], rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_threads_agree(op):
    # (the outer kept dims split among the threads, each with its own statistics arrays)
    x = np.random.default_rng(4).standard_normal((16, 12, 20, 24)).astype(np.float32)
    want = getattr(torch, op)(torch.tensor(x), 1).numpy()
    old = llgrad.get_num_threads()
    try:
        for threads in (1, 2, 3):
            llgrad.set_num_threads(threads)
            cf = llgrad.compile(lambda t: getattr(llgrad, op)(t, 1))
            for _ in range(2):
                got = cf(llgrad.tensor(x)).numpy()
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    finally:
        llgrad.set_num_threads(old)
