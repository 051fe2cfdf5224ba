"""softmax, log_softmax, amax and max over rows of odd lengths (the vector loop's remainder,
a row shorter than one vector, one just past it) with NaN, +-inf and -0.0 in them, on
contiguous and strided operands: native code == the IR interpreter == eager == torch. The
row max is a vectorised NaN-propagating maximum (llvm.maximum): a NaN anywhere in a row
makes the whole softmax row NaN, as in torch, and an all -inf row gives NaN."""
import numpy as np
import pytest

import llgrad
from llgrad.ir.interpret import interpret

torch = pytest.importorskip("torch")

FAST = (1, 17, 129)
SLOW = (3, 15, 16, 33, 127)


def _rows(n, seed):
    """8 rows of n: plain, a NaN, +inf, all -inf, -0.0 / +0.0 mixes, -inf beside values."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((8, n)) * 4).astype(np.float32)
    x[1, n // 2] = np.nan
    x[2, n - 1] = np.inf
    x[3, :] = -np.inf
    x[4, :] = -0.0
    x[5, ::2] = 0.0
    x[5, 1::2] = -0.0
    x[6, : max(1, n // 3)] = -np.inf
    x[7, 0] = -np.inf if n > 1 else 7.0
    return x


def _ops(lib, x):
    mx = x.max(dim=-1)
    return (lib.softmax(x, dim=-1), lib.log_softmax(x, dim=-1), x.amax(dim=-1), mx.values,
            mx.indices)


def _operand(data, strided):
    """(the llgrad tensor, the same values as a NumPy array): strided reads the rows
    through a transposed view of a (n, 8) array."""
    if strided:
        t = llgrad.tensor(np.ascontiguousarray(data.T)).t()
    else:
        t = llgrad.tensor(data)
    return t, data


def _check(n, strided, seed=0):
    data = _rows(n, seed)
    x, arr = _operand(data, strided)
    eager = [r.numpy() for r in _ops(llgrad, x)]
    want = [r.numpy() for r in _ops(torch, torch.tensor(arr))]
    interp = interpret(llgrad.trace(lambda a: _ops(llgrad, a), x), x.numpy())
    fn = llgrad.compile(lambda a: _ops(llgrad, a))
    fn(x)
    fn.wait()                          # (LLGRAD_COMPILE=background: native code from here)
    got = [r.numpy() for r in fn(x)]
    assert fn.n_traces == 1
    for k, (g, e, i, w) in enumerate(zip(got, eager, interp, want)):
        what = ("softmax", "log_softmax", "amax", "max", "argmax")[k]
        for other, name in ((e, "eager"), (np.asarray(i), "interpreter"), (w, "torch")):
            if k == 4:
                np.testing.assert_array_equal(g, other, err_msg=f"{what} vs {name}")
            else:
                np.testing.assert_allclose(g, other, rtol=2e-6, atol=1e-7, equal_nan=True,
                                           err_msg=f"{what} vs {name}")
    sm, lsm, amax, mx = got[:4]
    assert np.isnan(sm[1]).all() and np.isnan(lsm[1]).all() and np.isnan(amax[1])
    assert np.isnan(sm[3]).all() and amax[3] == -np.inf
    assert amax[2] == np.inf and np.isnan(sm[2]).all()     # (inf - inf: torch's NaN row)
    np.testing.assert_array_equal(amax, mx)


@pytest.mark.parametrize("n", FAST)
def test_rows_contiguous(n):
    _check(n, strided=False)


def test_rows_strided():
    _check(17, strided=True)


@pytest.mark.slow
@pytest.mark.parametrize("strided", [False, True])
@pytest.mark.parametrize("n", SLOW + FAST)
def test_rows_all_lengths(n, strided):
    _check(n, strided, seed=n)
