"""llgrad/ir/np_sums.py's cascade_sum against NumPy: the same shape and dtype as
np.add.reduce for every layout, axis set, keepdim and dtype, values within float32's
cascade bound of the float64 sum; None where NumPy already adds pairwise (the caller keeps
NumPy's bits there). Oracle: NumPy in float64."""
import numpy as np
import pytest

from llgrad.ir.np_sums import SEQUENTIAL_FROM, cascade_sum

U32 = 2.0 ** -24


def _layouts(rng, shape, dtype):
    x = rng.random(shape).astype(dtype)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.random(shape).astype(dtype)
    yield "c", x
    yield "t", x.T                                  # every axis reversed in memory
    yield "step", x[::2] if shape[0] > 1 else x     # a strided outer axis
    yield "f", np.asfortranarray(x)


CASES = [((5000, 8), (0,)), ((5000, 8), (1,)), ((8, 5000), (1,)), ((4097, 3), (0,)),
         ((600, 3, 20), (0,)), ((600, 3, 20), (0, 2)), ((300, 7, 9), (0, 1)),
         ((300, 300), None), ((1000, 1, 5), (0, 1)), ((9, 1000), (0,)), ((70, 70), (0,))]


@pytest.mark.parametrize("shape,dim", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64])
def test_matches_numpy_shape_dtype_and_float64_sum(shape, dim, dtype):
    rng = np.random.default_rng(hash((shape, dim)) % 2 ** 32)
    for name, x in _layouts(rng, shape, dtype):
        for keep in (False, True):
            got = cascade_sum(x, dim, keep)
            want = np.add.reduce(x, axis=dim, keepdims=keep)
            if got is None:
                continue
            assert got.shape == want.shape and got.dtype == want.dtype, (name, keep)
            wide = np.clongdouble if x.dtype.kind == "c" else np.longdouble
            exact = np.add.reduce(x.astype(wide), axis=dim, keepdims=keep)
            # positive terms: each block of 32 in sequence, then float32's block totals
            # in float64, float64's level by level (3 levels of 32 at most here)
            tol = 34 * U32 if x.real.dtype == np.float32 else 100 * 2.0 ** -53
            err = np.abs(got.astype(wide) - exact) / np.abs(exact)
            assert float(err.max()) <= tol, (name, keep)


def test_cascade_taken_where_numpy_adds_in_sequence_and_not_elsewhere():
    x = np.ones((SEQUENTIAL_FROM * 4, 5), np.float32)
    assert cascade_sum(x, (0,), False) is not None          # rows added in sequence
    assert cascade_sum(x.T, (1,), False) is not None        # the same through a view
    assert cascade_sum(x.T.copy(), (1,), False) is None     # along memory: NumPy's pairwise
    assert cascade_sum(x, None, False) is None              # one flat pairwise sum
    assert cascade_sum(x[:SEQUENTIAL_FROM - 1], (0,), False) is None   # short: NumPy's
    assert cascade_sum(x.astype(np.int64), (0,), False) is None
    assert cascade_sum(x.astype(np.float16), (0,), False) is None


def test_float32_error_far_below_sequential_sum():
    """x.sum(0) of (100000, 8) values in [0, 0.9): NumPy's sequential order is off by ~8e-6
    relative; the cascade by ~2 float32 roundings."""
    x = (np.random.default_rng(0).random((100000, 8), dtype=np.float32) * 0.9)
    exact = x.astype(np.float64).sum(0)
    rel = np.abs(cascade_sum(x, (0,), False) - exact).max() / exact.max()
    assert rel < 4 * U32
    assert np.abs(np.add.reduce(x, axis=0) - exact).max() / exact.max() > 20 * U32


def test_dtype_argument_sums_in_that_dtype():
    x = np.random.default_rng(1).random((5000, 4), dtype=np.float32)
    got = cascade_sum(x, (0,), True, np.float64)
    assert got.dtype == np.float64 and got.shape == (1, 4)
    np.testing.assert_allclose(got, x.astype(np.float64).sum(0, keepdims=True), rtol=1e-13)


def test_special_values_as_numpy():
    x = np.ones((2000, 4), np.float32)
    x[5, 0], x[7, 1], x[9, 2], x[11, 2] = np.inf, np.nan, np.inf, -np.inf
    with np.errstate(invalid="ignore"):
        got, want = cascade_sum(x, (0,), False), np.add.reduce(x, axis=0)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(got[~np.isnan(want)], want[~np.isnan(want)])
