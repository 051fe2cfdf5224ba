"""Eager speed fixes of round s76 (D), against torch: a sum over a short last axis (2 to 7
elements, many rows) as column adds (ir/np_sums.short_last_sum: NumPy's reduce ran an inner
loop per row, ~7x the adds; the same bits), adaptive average pooling's windows gathered
along their own dim, rows first, with the longer windows' last element added on the small
result (nn/functional_pool.window_mean: no moved copies, no mask over the gathered windows),
and tril / triu on a kept mask without a second copy of np.where's result (ir/ops_tensor)."""
import numpy as np
import pytest

import llgrad
from llgrad.ir import np_sums

torch = pytest.importorskip("torch")


def _close(got, want, rtol=1e-5, atol=1e-6):
    w, g = want.detach().numpy(), got.detach().numpy()
    assert g.shape == w.shape and g.dtype == w.dtype
    np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True)


def _run(fn, x, *args, channels_last=False, nan=False):
    if nan:
        x = x.copy()
        x.flat[3], x.flat[17] = np.nan, np.inf
    lx, tx = llgrad.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    li, ti = lx, tx
    if channels_last:
        li, ti = lx.to(memory_format=llgrad.channels_last), tx.to(
            memory_format=torch.channels_last)
    got = getattr(llgrad.nn.functional, fn)(li, *args)
    want = getattr(torch.nn.functional, fn)(ti, *args)
    g = np.random.RandomState(1).randn(*want.shape).astype(x.dtype)
    got.backward(llgrad.tensor(g))
    want.backward(torch.tensor(g))
    _close(got, want)
    _close(lx.grad, tx.grad)
    assert tuple(got.stride()) == want.stride()


# ---- short last-axis sums ----------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_short_last_sum_same_bits_as_numpy(dtype):
    r = np.random.RandomState(0)
    for n in range(2, np_sums.SHORT_LAST + 1):
        x = (r.randn(400, n) * r.choice([1, 1e4, 1e-4, 0, -0.0], size=(400, n))).astype(dtype)
        x[:3] = -0.0                # (a sum of -0.0s: +0.0, as NumPy's reduce)
        want = np.add.reduce(x, axis=-1)
        got = np_sums.short_last_sum(x)
        assert got.dtype == want.dtype and np.array_equal(got.view(np.uint8),
                                                          want.view(np.uint8))


def test_short_last_sum_nan_inf():
    x = np.ones((300, 3), np.float32)
    x[0] = [np.inf, -np.inf, 1]
    x[1] = [np.nan, 1, 2]
    x[2] = [np.inf, 1, 1]
    got = llgrad.tensor(x).sum(-1).numpy()
    want = torch.tensor(x).sum(-1).numpy()
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("op", ["sum", "mean"])
def test_short_last_sum_and_mean_against_torch(op, keepdim):
    x = np.random.RandomState(2).randn(16, 32, 5).astype(np.float32)
    lx, tx = llgrad.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    got, want = getattr(lx, op)(-1, keepdim=keepdim), getattr(tx, op)(-1, keepdim=keepdim)
    _close(got, want)
    assert tuple(got.stride()) == want.stride()
    got.sum().backward()
    want.sum().backward()
    _close(lx.grad, tx.grad)


# ---- adaptive average pooling ------------------------------------------------------------

@pytest.mark.parametrize("shape,out", [((2, 8, 256), 10), ((2, 3, 5), 3), ((2, 3, 5), 7),
                                       ((3, 5), 2), ((2, 3, 9), 1)])
def test_adaptive_avg_pool1d(shape, out):
    _run("adaptive_avg_pool1d", np.random.RandomState(3).randn(*shape).astype(np.float32), out)


@pytest.mark.parametrize("shape,out,cl,nan", [
    ((2, 4, 32, 32), 7, False, False), ((2, 4, 32, 32), 7, True, False),
    ((2, 4, 10, 9), (3, 4), False, True), ((4, 10, 9), (None, 4), False, False),
    ((4, 10, 9), (13, 4), False, False), ((2, 3, 11, 6), (4, 6), False, False)])
def test_adaptive_avg_pool2d(shape, out, cl, nan):
    x = np.random.RandomState(4).randn(*shape).astype(np.float32)
    _run("adaptive_avg_pool2d", x, out, channels_last=cl, nan=nan)


def test_adaptive_avg_pool3d_float64():
    x = np.random.RandomState(5).randn(2, 2, 7, 9, 10)
    _run("adaptive_avg_pool3d", x, (3, 4, 6), nan=True)


def test_adaptive_avg_pool_float16_same_values():
    x = np.random.RandomState(6).randn(2, 3, 9, 11).astype(np.float16)
    got = llgrad.nn.functional.adaptive_avg_pool2d(llgrad.tensor(x), (4, 3)).numpy()
    want = torch.nn.functional.adaptive_avg_pool2d(torch.tensor(x), (4, 3)).numpy()
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=1e-3)


# ---- tril / triu -------------------------------------------------------------------------

@pytest.mark.parametrize("fn,k", [("tril", 0), ("tril", -2), ("triu", 1), ("triu", -1),
                                  ("tril", 9), ("triu", 0)])
@pytest.mark.parametrize("layout", ["rows", "transposed", "batched"])
def test_tril_triu(fn, k, layout):
    r = np.random.RandomState(7)
    x = r.randn(3, 6, 5).astype(np.float32) if layout == "batched" else \
        r.randn(6, 7).astype(np.float32)
    x[0, 0] = np.nan if layout == "rows" else x[0, 0]
    lx, tx = llgrad.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    li, ti = (lx.transpose(-2, -1), tx.transpose(-2, -1)) if layout == "transposed" else \
        (lx, tx)
    got, want = getattr(li, fn)(k), getattr(ti, fn)(k)
    _close(got, want)
    assert tuple(got.stride()) == want.stride()
    got.sum().backward()
    want.sum().backward()
    _close(lx.grad, tx.grad)


@pytest.mark.parametrize("dtype", [np.bool_, np.int64, np.complex64])
def test_tril_triu_dtypes(dtype):
    x = (np.arange(20).reshape(4, 5) % 3).astype(dtype)
    for fn in ("tril", "triu"):
        got = getattr(llgrad.tensor(x), fn)(1)
        want = getattr(torch.tensor(x), fn)(1)
        assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
        np.testing.assert_array_equal(got.numpy(), want.numpy())
