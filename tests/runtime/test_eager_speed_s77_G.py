"""Eager speed fixes of round s77 (G), against torch: gather of a C-contiguous input as a
take of flat positions (ir/ops_data_movement._gather: NumPy's take_along_axis built one
broadcast index per dim, ~3x the time), copy_ of a tensor of the destination's dtype
written once (runtime/inplace.call_inplace: the copy op's impl copied the source, then the
write copied it again), and adaptive average pooling's uneven windows padded by one
appended zero (nn/functional_pool.window_mean: four ops, no mask, no second gather).
Each checked for values and gradients against torch; each test also checks the faster
path is the one taken (the values alone were right before)."""
import numpy as np
import pytest

import llgrad
from llgrad.ir import OPS

torch = pytest.importorskip("torch")


def _close(got, want, rtol=1e-5, atol=1e-6):
    w, g = want.detach().numpy(), got.detach().numpy()
    assert g.shape == w.shape and g.dtype == w.dtype
    np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True)


def _pair(x):
    return llgrad.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)


def _no_take_along_axis(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("take_along_axis on the fast path")
    monkeypatch.setattr(np, "take_along_axis", refuse)


# ---- gather ------------------------------------------------------------------------------

@pytest.mark.parametrize("shape,ishape,dim", [
    ((32, 16, 12), (32, 16, 5), 2), ((32, 16, 12), (7, 16, 12), 0),
    ((6, 9, 4), (5, 3, 4), 1), ((6, 9, 4), (6, 9, 1), -1), ((50,), (80,), 0),
    ((4, 1, 7), (4, 1, 3), 2)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gather_flat_positions_values_and_grad(monkeypatch, shape, ishape, dim, dtype):
    r = np.random.RandomState(0)
    x = r.randn(*shape).astype(dtype)
    idx = r.randint(0, shape[dim], size=ishape).astype(np.int64)
    lx, tx = _pair(x)
    _no_take_along_axis(monkeypatch)
    got = lx.gather(dim, llgrad.tensor(idx))
    want = tx.gather(dim, torch.tensor(idx))
    _close(got, want, 0, 0)
    g = r.randn(*ishape).astype(dtype)
    got.backward(llgrad.tensor(g))
    want.backward(torch.tensor(g))
    _close(lx.grad, tx.grad)


def test_gather_other_dtypes_and_layouts():
    r = np.random.RandomState(1)
    for x in (r.randint(-9, 9, size=(8, 10)), r.rand(8, 10) > 0.5,
              (r.randn(8, 10) + 1j * r.randn(8, 10)).astype(np.complex64)):
        idx = r.randint(0, 10, size=(8, 4))
        got = llgrad.tensor(x).gather(1, llgrad.tensor(idx)).numpy()
        want = torch.tensor(x).gather(1, torch.tensor(idx)).numpy()
        assert got.dtype == want.dtype and np.array_equal(got, want)
    x = r.randn(10, 8).astype(np.float32)     # (a transposed input: take_along_axis's path)
    idx = r.randint(0, 10, size=(8, 3))
    got = llgrad.tensor(x).t().gather(1, llgrad.tensor(idx)).numpy()
    assert np.array_equal(got, torch.tensor(x).t().gather(1, torch.tensor(idx)).numpy())
    with pytest.raises(RuntimeError):
        llgrad.tensor(x).gather(1, llgrad.tensor(np.full((10, 2), 8)))
    assert llgrad.tensor(x).gather(1, llgrad.tensor(np.zeros((10, 0), np.int64))).shape == (10, 0)


# ---- copy_ -------------------------------------------------------------------------------

def test_copy_same_dtype_writes_once_values_grad_version(monkeypatch):
    calls = []
    impl = OPS["copy"].impl
    monkeypatch.setattr(OPS["copy"], "impl", lambda *a, **k: calls.append(1) or impl(*a, **k))
    r = np.random.RandomState(2)
    s = r.randn(3, 4, 5).astype(np.float32)
    ls, ts = _pair(s)
    for lib, src in ((llgrad, ls), (torch, ts)):
        out = lib.zeros(3, 6, 7)
        out[:, 1:5, 2:7].copy_(src * 2)         # (a strided view: CopySlices)
        out[:, 0].copy_(src[:, 0, :1])          # (a broadcast source)
        if lib is llgrad:
            lo = out
        else:
            to = out
    _close(lo, to, 0, 0)
    g = r.randn(3, 6, 7).astype(np.float32)
    (lo * llgrad.tensor(g)).sum().backward()
    (to * torch.tensor(g)).sum().backward()
    _close(ls.grad, ts.grad)
    assert calls == []
    a = llgrad.tensor(np.arange(12.0, dtype=np.float32))
    v = a._version
    a.copy_(a)                                  # (the same memory: unchanged, one bump)
    assert np.array_equal(a.numpy(), np.arange(12.0)) and a._version == v + 1
    with pytest.raises(RuntimeError, match="single memory location"):
        a[1:].copy_(a[:-1])
    b = llgrad.tensor(np.arange(6.0)).reshape(2, 3)   # (float64 into float32: the op's cast)
    c = llgrad.zeros(2, 3)
    c.copy_(b)
    assert c.dtype == llgrad.float32 and np.array_equal(c.numpy(), np.arange(6.0).reshape(2, 3))
    assert len(calls) == 1


def test_copy_into_a_transposed_view_and_from_an_overlapping_strided_source():
    x = np.arange(16.0, dtype=np.float32).reshape(4, 4)
    lx, tx = llgrad.tensor(x.copy()), torch.tensor(x.copy())
    lx.t().copy_(llgrad.tensor(x + 1))
    tx.t().copy_(torch.tensor(x + 1))
    _close(lx, tx, 0, 0)
    lx[::2].copy_(lx[1::2])       # (the same storage, disjoint rows: let through)
    tx[::2].copy_(tx[1::2])
    _close(lx, tx, 0, 0)


# ---- adaptive average pooling ------------------------------------------------------------

def _graph_names(t):
    names, stack = [], [t.grad_fn]
    while stack:
        n = stack.pop()
        if n is not None:
            names.append(n.name())
            stack.extend(f for f, _ in n.next_functions)
    return names


@pytest.mark.parametrize("n,o", [(256, 10), (7, 3), (5, 9), (12, 5), (3, 1), (9, 3)])
@pytest.mark.parametrize("nan", [False, True])
def test_adaptive_avg_pool1d_values_and_grad(n, o, nan):
    r = np.random.RandomState(3)
    x = r.randn(2, 3, n).astype(np.float32)
    if nan:
        x[0, 0, 1], x[1, 2, n - 1] = np.nan, np.inf
    lx, tx = _pair(x)
    got = llgrad.nn.functional.adaptive_avg_pool1d(lx, o)
    want = torch.nn.functional.adaptive_avg_pool1d(tx, o)
    _close(got, want)
    g = r.randn(*want.shape).astype(np.float32)
    got.backward(llgrad.tensor(g))
    want.backward(torch.tensor(g))
    _close(lx.grad, tx.grad)
    names = _graph_names(got)
    assert "MaskedFillBackward0" not in names and "AddBackward0" not in names
    assert names.count("IndexSelectBackward0") == (n % o != 0)


@pytest.mark.parametrize("size", [(5, 7), (3, 10), (4, 4)])
def test_adaptive_avg_pool2d_uneven_values_grad_and_gradcheck(size):
    r = np.random.RandomState(4)
    x = r.randn(2, 3, 9, 11)
    lx, tx = _pair(x.astype(np.float32))
    got = llgrad.nn.functional.adaptive_avg_pool2d(lx, size)
    want = torch.nn.functional.adaptive_avg_pool2d(tx, size)
    _close(got, want)
    g = r.randn(*want.shape).astype(np.float32)
    got.backward(llgrad.tensor(g))
    want.backward(torch.tensor(g))
    _close(lx.grad, tx.grad)
    if size == (5, 7):          # (float64, finite differences: one size, one plane)
        assert llgrad.autograd.gradcheck(
            lambda t: llgrad.nn.functional.adaptive_avg_pool2d(t, size),
            (llgrad.tensor(x[:1, :1], requires_grad=True),))


def test_adaptive_avg_pool3d_uneven_and_zero_output():
    r = np.random.RandomState(5)
    x = r.randn(1, 2, 5, 6, 7).astype(np.float32)
    lx, tx = _pair(x)
    got = llgrad.nn.functional.adaptive_avg_pool3d(lx, (3, 4, 5))
    want = torch.nn.functional.adaptive_avg_pool3d(tx, (3, 4, 5))
    _close(got, want)
    got.sum().backward()
    want.sum().backward()
    _close(lx.grad, tx.grad)
    got = llgrad.nn.functional.adaptive_avg_pool1d(llgrad.tensor(x[0, :, 0]), 0)
    assert tuple(got.shape) == tuple(torch.nn.functional.adaptive_avg_pool1d(
        torch.tensor(x[0, :, 0]), 0).shape)


@pytest.mark.slow
def test_adaptive_avg_pool1d_compiled_matches_eager():
    r = np.random.RandomState(6)
    x = r.randn(2, 4, 23).astype(np.float32)

    def f(t):
        return llgrad.nn.functional.adaptive_avg_pool1d(t, 6).sin()

    fn = llgrad.compile(f)
    fn(llgrad.tensor(x, requires_grad=True))
    fn.wait()                   # (LLGRAD_COMPILE=background: built by now)
    lx, ex = llgrad.tensor(x, requires_grad=True), llgrad.tensor(x, requires_grad=True)
    got, want = fn(lx), f(ex)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-6)
    got.sum().backward()
    want.sum().backward()
    np.testing.assert_allclose(lx.grad.numpy(), ex.grad.numpy(), rtol=1e-5, atol=1e-6)
    assert fn.n_traces == 1


def test_gathers_flat_positions_along_a_negative_dim():
    """The op's impl takes dim as the op table gives it; a negative one (torch's own
    convention, which a rule may pass on) picks along the same axis as its positive."""
    from llgrad.ir.ops_data_movement import _gather
    x = np.arange(24.).reshape(2, 3, 4)
    i = np.array([[[1, 0], [3, 2], [0, 0]], [[2, 2], [1, 1], [3, 0]]])
    for dim in (-1, 2):
        np.testing.assert_array_equal(_gather(x, i, dim), np.take_along_axis(x, i, axis=2))
