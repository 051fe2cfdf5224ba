"""An eager LSTM layer's step products bound once per layer (compile/eager_gemm_bound.py:
gemm.py's kernel over column blocks on the threads, codegen/eager_ogemm.py, or the BLAS
shim with beta 1): bind's products against NumPy's for the layouts and sizes it takes and
the ones it refuses; nn.LSTM's outputs and gradients against torch's, with the bound path
on and off (the same output where the hidden size fits OpenBLAS's one K block), on 1 and
2 threads, batch 32 as bench/real_models.py's LSTM (OpenBLAS's small-matrix path below)."""
import numpy as np
import pytest

import llgrad
from llgrad.compile import eager_gemm, eager_gemm_bound, eager_native, eager_steps
from llgrad.ir.np_address import data_pointer

pytestmark = pytest.mark.skipif(not eager_native.ENABLED, reason="LLGRAD_EAGER_NATIVE=0")


@pytest.fixture(autouse=True)
def _sync_and_threads(monkeypatch):
    monkeypatch.setenv("LLGRAD_COMPILE", "sync")      # (kernels built before the first call)
    before = llgrad.get_num_threads()
    yield
    llgrad.set_num_threads(before)


def _layouts(rng, m, k, n, dtype, ta, tb):
    a = rng.standard_normal((k, m) if ta else (m, k)).astype(dtype)
    b = rng.standard_normal((n, k) if tb else (k, n)).astype(dtype)
    return (a.T if ta else a), (b.T if tb else b)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m,k,n", [(32, 128, 512), (32, 512, 128), (5, 7, 33), (1, 3, 100),
                                   (9, 300, 70)])
@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True)])
def test_bound_product_matches_numpy(threads, dtype, m, k, n, ta, tb):
    llgrad.set_num_threads(threads)
    rng = np.random.default_rng(m * n + k)
    for beta in (0.0, 1.0):
        a, b = _layouts(rng, m, k, n, dtype, ta, tb)
        # out a block of a wider buffer (row stride past n), as an LSTM's gates
        wide = rng.standard_normal((m, n + 5)).astype(dtype)
        out = wide[:, :n]
        before = out.copy()
        fn = eager_gemm_bound.bind(a, b, out, beta)
        assert fn is not None
        calls = eager_gemm.stats["calls"]
        # operands elsewhere, laid out alike: the step's addresses are what is used
        a2, b2 = (np.ascontiguousarray(x) if x.flags.c_contiguous else
                  np.asfortranarray(x) for x in (a * 2, b - 1))
        fn(data_pointer(a2), data_pointer(b2), data_pointer(out))
        assert eager_gemm.stats["calls"] == calls + 1
        want = (a2.astype(np.float64) @ b2.astype(np.float64)) + beta * before
        tol = 1e-4 if dtype == np.float32 else 1e-12
        scale = np.abs(want).max()
        np.testing.assert_allclose(out, want, rtol=0, atol=tol * scale)
        np.testing.assert_array_equal(wide[:, n:], wide[:, n:].copy())


def test_bind_refuses_what_it_cannot_take():
    a = np.ones((4, 6), np.float32)
    b = np.ones((6, 8), np.float32)
    out = np.empty((4, 8), np.float32)
    assert eager_gemm_bound.bind(a, b.astype(np.float64), out) is None    # mixed dtypes
    assert eager_gemm_bound.bind(a, b, np.empty((4, 9), np.float32)) is None    # shape
    assert eager_gemm_bound.bind(a, b, np.empty((8, 4), np.float32).T) is None  # column-major
    assert eager_gemm_bound.bind(a[:, ::2], b[:3], out) is None           # no unit stride
    assert eager_gemm_bound.bind(a.astype(np.int64), b.astype(np.int64),
                                 np.zeros((4, 8), np.int64)) is None
    ro = np.empty((4, 8), np.float32)
    ro.flags.writeable = False
    assert eager_gemm_bound.bind(a, b, ro) is None


def _lstm(lib, h, bidirectional, x, seed=0):
    lib.manual_seed(seed)
    m = lib.nn.LSTM(x.shape[2], h, batch_first=True, bidirectional=bidirectional)
    return m


def _run(lib, m, x):
    xt = lib.tensor(x, requires_grad=True)
    y, (hn, cn) = m(xt)
    loss = (y * y).sum() + 2 * hn.sum() + cn.sum()
    grads = lib.autograd.grad(loss, [xt] + list(m.parameters()))
    return [y.detach().numpy().copy()] + [g.numpy().copy() for g in grads]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("h,bidirectional", [(128, False), (64, True), (300, False)])
def test_lstm_against_torch_path_on_and_off(monkeypatch, threads, h, bidirectional):
    torch = pytest.importorskip("torch")
    llgrad.set_num_threads(threads)
    rng = np.random.default_rng(h)
    x = rng.standard_normal((32, 12, 16)).astype(np.float32)
    tm = _lstm(torch, h, bidirectional, x)
    lm = _lstm(llgrad, h, bidirectional, x)
    lm.load_state_dict({k: llgrad.tensor(v.detach().numpy().copy())
                        for k, v in tm.state_dict().items()})
    want = _run(torch, tm, x)
    calls = eager_gemm.stats["calls"]
    on = _run(llgrad, lm, x)
    assert eager_gemm.stats["calls"] >= calls + 2 * (12 - 1)      # the steps' products
    monkeypatch.setattr(eager_steps.Steps, "product", lambda self, *a, **k: None)
    off = _run(llgrad, lm, x)
    for got_on, got_off, ref in zip(on, off, want):
        scale = np.abs(ref).max()
        np.testing.assert_allclose(got_on, ref, rtol=0, atol=1e-5 * scale)
        np.testing.assert_allclose(got_off, ref, rtol=0, atol=1e-5 * scale)
    if h <= 128:        # (the forward's K = H within OpenBLAS's one block: the same bits)
        np.testing.assert_array_equal(on[0], off[0])


def test_native_off_keeps_numpy(monkeypatch):
    """LLGRAD_EAGER_NATIVE=0's switch: bind takes nothing, the layer runs matmul."""
    monkeypatch.setattr(eager_gemm_bound, "ENABLED", False)
    a = np.ones((4, 6), np.float32)
    assert eager_gemm_bound.bind(a, np.ones((6, 8), np.float32),
                                 np.empty((4, 8), np.float32)) is None


# ---- a mean's backward (the division before the broadcast) and x ** 1 (a copy) -------------
@pytest.mark.parametrize("dim,keepdim", [(None, False), ((1,), False), ((0, 2), True)])
def test_mean_backward_against_torch(dim, keepdim):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    x = rng.standard_normal((6, 7, 5)).astype(np.float32)
    shape = () if dim is None else np.mean(x, axis=dim, keepdims=keepdim).shape
    go = rng.standard_normal(shape).astype(np.float32)
    count = x.size if dim is None else int(np.prod([x.shape[d] for d in dim]))
    # the quotients of the broadcast gradient (PyTorch's expand, then the division)
    kept = go if dim is None or keepdim else np.expand_dims(go, dim)
    want = np.broadcast_to(kept, x.shape) / np.float32(count)
    for lib in (llgrad, torch):
        t = lib.tensor(x, requires_grad=True)
        y = t.mean() if dim is None else t.mean(dim, keepdim=keepdim)
        g = lib.autograd.grad(y, [t], lib.tensor(go))[0]
        np.testing.assert_array_equal(g.numpy(), want)
        assert tuple(g.stride()) == (35, 5, 1)
    # an empty input: nan's quotient broadcast to nothing
    e = llgrad.zeros(0, 3, requires_grad=True)
    e.mean().backward()
    assert e.grad.shape == (0, 3)


def test_pow_one_is_a_copy_and_its_backward_matches_torch():
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(2).standard_normal((5, 9)).astype(np.float32)
    x[0, :4] = [np.nan, np.inf, -0.0, -np.inf]
    lt, tt = llgrad.tensor(x).t(), torch.tensor(x).t()
    r = lt ** 1
    np.testing.assert_array_equal(r.numpy(), tt.numpy())
    assert np.signbit(r.numpy()[2, 0]) and tuple(r.stride()) == tuple((tt ** 1).stride())
    assert not np.shares_memory(r.numpy(), lt.numpy())
    xs = [lib.tensor(np.abs(x[1:]) + 0.5, requires_grad=True) for lib in (llgrad, torch)]
    g = [lib.autograd.grad(((v - 0.5) ** 2).mean(), [v])[0].numpy()
         for lib, v in zip((llgrad, torch), xs)]
    np.testing.assert_array_equal(g[0], g[1])
