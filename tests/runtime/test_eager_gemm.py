"""Eager matrix products on llgrad's threads (compile/eager_gemm.py): at 2 threads a big
float product of two matrices runs on the BLAS shim (chunks on llgrad's pool, OpenBLAS on
one thread each) and equals NumPy's matmul over every layout OpenBLAS takes (row- and
column-major, row-strided slices, transposed views, a Linear's x @ w.T, into an `out`,
stacks broadcast); small products, 1 thread, other dtypes, mixed dtypes and vectors keep
NumPy's; nn.Linear's and attention's forward + backward equal their 1-thread runs; the hook
can be turned off."""
import numpy as np
import pytest

import llgrad
from llgrad.compile import eager_builds, eager_gemm
from llgrad.ir.np_matmul import matmul

from gemm_checks import each_product  # noqa: E402


@pytest.fixture
def threads():
    old = llgrad.get_num_threads()
    yield llgrad.set_num_threads
    llgrad.set_num_threads(old)


def _pair(m, k, n, dtype, rng):
    return (rng.standard_normal((m, k)).astype(dtype),
            rng.standard_normal((k, n)).astype(dtype))


def _layouts(a, b):
    wide_a = np.zeros((a.shape[0], a.shape[1] + 7), a.dtype)
    wide_a[:, 3:3 + a.shape[1]] = a
    yield "C", a, b
    yield "F", np.asfortranarray(a), np.asfortranarray(b)
    yield "A row-strided slice", wide_a[:, 3:3 + a.shape[1]], b
    yield "B transposed view", a, np.ascontiguousarray(b.T).T
    yield "both transposed views", np.ascontiguousarray(a.T).T, np.ascontiguousarray(b.T).T


def _calls(a, b):
    before = eager_gemm.stats["calls"]
    got = matmul(a, b)
    eager_builds.wait()             # (the shim's first build: NumPy's matmul meanwhile)
    got = matmul(a, b)
    return got, eager_gemm.stats["calls"] - before


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("mkn", [(512, 128, 384), (64, 512, 256), (300, 77, 1000)])
def test_layouts_match_numpy(threads, dtype, mkn):
    threads(2)
    rng = np.random.default_rng(0)
    a, b = _pair(*mkn, dtype, rng)
    for name, x, y in _layouts(a, b):
        got, calls = _calls(x, y)
        assert calls >= 1, f"{name}: the shim did not run"
        assert got.flags.c_contiguous and got.dtype == dtype
        want = np.matmul(x, y)
        np.testing.assert_allclose(got, want, rtol=8 * np.finfo(dtype).eps,
                                   atol=8 * np.finfo(dtype).eps * np.abs(want).max(),
                                   err_msg=name)


def test_linear_forward_few_rows(threads):
    """x @ w.T with 32 rows runs as (w @ x.T).T, as np_matmul.py's NumPy path does."""
    threads(2)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((32, 512)).astype(np.float32)
    w = rng.standard_normal((256, 512)).astype(np.float32)
    got, calls = _calls(x, w.T)
    assert calls >= 1
    np.testing.assert_array_equal(got, np.matmul(w, x.T).T)


@pytest.mark.parametrize("case", ["one thread", "small", "int", "mixed", "vector", "no hook"])
def test_numpy_serves(threads, case):
    threads(1 if case == "one thread" else 2)
    rng = np.random.default_rng(2)
    a, b = _pair(256, 256, 256, np.float32, rng)
    if case == "small":
        a, b = _pair(32, 32, 32, np.float32, rng)
    elif case == "int":
        a, b = a.astype(np.int64), b.astype(np.int64)
    elif case == "mixed":
        b = b.astype(np.float64)
    elif case == "vector":
        b = b[:, 0].copy()
    if case == "no hook":
        eager_gemm.install(False)
    try:
        got, calls = _calls(a, b)
    finally:
        eager_gemm.install()
    assert calls == 0
    np.testing.assert_array_equal(got, np.matmul(a, b))


def test_linear_training_matches_one_thread(threads):
    def run(t):
        threads(t)
        llgrad.manual_seed(0)
        net = llgrad.nn.Sequential(llgrad.nn.Linear(256, 512), llgrad.nn.GELU(),
                                   llgrad.nn.Linear(512, 256))
        x = llgrad.randn(384, 256)
        loss = (net(x) ** 2).mean()
        loss.backward()
        return [loss.detach().numpy()] + [p.grad.numpy() for p in net.parameters()]

    one = run(1)
    run(2)
    eager_builds.wait()
    before = eager_gemm.stats["calls"]
    two = run(2)
    assert eager_gemm.stats["calls"] - before >= 5      # 2 forward, 2 x 2 backward (-1:
    for a, b in zip(one, two):                          # the first layer's input grad)
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5 * np.abs(a).max())


def test_into_out(threads):
    """matmul(a, b, out=...) (the LSTM's per-step products): written in place when out has
    unit stride along its rows and overlaps neither operand; else NumPy's."""
    threads(2)
    rng = np.random.default_rng(3)
    a, b = _pair(64, 128, 512, np.float32, rng)
    want = np.matmul(a, b)
    big = np.full((64, 600), 7.0, np.float32)
    for out in (np.empty((64, 512), np.float32), big[:, 50:562]):
        matmul(a, b, out=out)
        eager_builds.wait()
        before = eager_gemm.stats["calls"]
        got = matmul(a, b, out=out)
        assert got is out and eager_gemm.stats["calls"] == before + 1
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    assert (big[:, :50] == 7).all() and (big[:, 562:] == 7).all()
    before = eager_gemm.stats["calls"]
    for out in (np.empty((512, 64), np.float32).T, np.empty((64, 512), np.float64)):
        if out.dtype == np.float32:
            matmul(a, b, out=out)
            np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
        else:
            np.testing.assert_allclose(matmul(a, b, out=out), want, rtol=1e-5, atol=1e-3)
    square = rng.standard_normal((256, 256)).astype(np.float32)
    expect = np.matmul(square, square)
    assert matmul(square, square.copy(), out=square) is square      # (out is an operand)
    np.testing.assert_allclose(square, expect, rtol=1e-5, atol=1e-4)
    assert eager_gemm.stats["calls"] == before


def test_stacks(threads):
    """Stacks of matrices (attention's products), broadcast as np.matmul's: one product a
    matrix; batches that do not broadcast raise NumPy's error."""
    threads(2)
    rng = np.random.default_rng(4)

    def r(*s):
        return rng.standard_normal(s).astype(np.float32)
    cases = [(r(8, 4, 256, 64), r(8, 4, 64, 256)), (r(8, 4, 256, 64), r(64, 256)),
             (r(256, 64), r(3, 64, 256)), (r(2, 1, 256, 64), r(1, 3, 64, 256)),
             (r(8, 4, 64, 256).swapaxes(-1, -2), r(8, 4, 256, 64).swapaxes(-1, -2)),
             (r(4, 256, 64)[::-1], r(8, 64, 256)[::2])]
    for a, b in cases:
        got, calls = _calls(a, b)
        assert calls >= 1
        each_product(got, a, b)
    with pytest.raises(ValueError):
        matmul(r(4, 256, 64), r(2, 64, 256))


def test_attention_matches_one_thread(threads):
    def run(t):
        threads(t)
        llgrad.manual_seed(0)
        q, k, v = (llgrad.randn(2, 4, 256, 64, requires_grad=True) for _ in range(3))
        y = llgrad.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        (y ** 2).sum().backward()
        return [y.detach().numpy()] + [t.grad.numpy() for t in (q, k, v)]

    one = run(1)
    run(2)
    eager_builds.wait()
    before = eager_gemm.stats["calls"]
    two = run(2)
    assert eager_gemm.stats["calls"] - before >= 4
    for a, b in zip(one, two):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5 * np.abs(a).max())
