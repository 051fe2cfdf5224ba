"""Eager products on llgrad's threads through eager_bgemm.py's kernel, each product one
OpenBLAS call: stacks of small products (attention's q @ k^T and p @ v; compile/eager_gemm.py's
_small_stack), a transposed B copied to row-major per product first (also compiled:
ops_matmul.py's pack_each), the batch over the threads at 2; and the two products of a
matrix product's backward at once, one a thread (eager_gemm.products, fast_vjp.py). Checked
against NumPy's matmul in every layout and batch broadcast, across thread counts (the same
bits where both run the batched kernel), across a change of thread count between calls,
and, for attention's and a Linear's forward and backward, against PyTorch."""
import numpy as np
import pytest

import llgrad
from llgrad.compile import eager_builds, eager_gemm
from llgrad.ir.np_matmul import matmul


@pytest.fixture
def threads():
    old = llgrad.get_num_threads()
    yield llgrad.set_num_threads
    llgrad.set_num_threads(old)


def _r(rng, dtype, *shape):
    return rng.standard_normal(shape).astype(dtype)


def _cases(dtype):
    rng = np.random.default_rng(0)

    def r(*s):
        return _r(rng, dtype, *s)
    q, k = r(8, 4, 64, 32), r(8, 4, 64, 32)
    return {
        "NN": (q, r(8, 4, 32, 64)),
        "NT (q @ k^T)": (q, k.swapaxes(-1, -2)),
        "TN": (r(8, 4, 32, 64).swapaxes(-1, -2), r(8, 4, 32, 64)),
        "TT": (r(8, 4, 32, 64).swapaxes(-1, -2), k.swapaxes(-1, -2)),
        "broadcast batch": (r(2, 1, 64, 32), r(1, 3, 64, 32).swapaxes(-1, -2)),
        "one matrix of a batch": (r(1, 64, 32), r(1, 64, 32).swapaxes(-1, -2)),
        "one row": (r(16, 1, 48), r(16, 48, 64)),
        "B too big to copy": (r(6, 40, 200), r(6, 128, 200).swapaxes(-1, -2)),
        "strided batch": (r(8, 64, 32)[::2], r(8, 64, 32)[1::2].swapaxes(-1, -2)),
    }


def _product(a, b):
    matmul(a, b)
    eager_builds.wait()         # (the batched kernel's first build: NumPy's matmul meanwhile)
    before = eager_gemm.stats["calls"]
    got = matmul(a, b)
    return got, eager_gemm.stats["calls"] - before


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("count", [1, 2])
def test_stacks_match_numpy(threads, dtype, count):
    threads(count)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for name, (a, b) in _cases(dtype).items():
        got, calls = _product(a, b)
        expect = np.matmul(a, b)
        assert got.shape == expect.shape and got.dtype == expect.dtype, name
        np.testing.assert_allclose(got, expect, rtol=tol, atol=tol * np.abs(expect).max(),
                                   err_msg=name)
        (m, k), n = a.shape[-2:], b.shape[-1]
        nb = int(np.prod(expect.shape[:-2]))
        packs = b.strides[-2] == b.itemsize and m > 1 and k * n <= 1 << 14
        splits = count == 2 and nb > 1 and nb * m * n * k >= 2 * eager_gemm.MIN_WORK
        assert calls == (1 if packs or splits else 0), name     # (else NumPy's matmul)


def test_plans_are_per_dtype(threads):
    """The plan cache's key holds the dtype: a float64 stack and a float32 one with the same
    shapes and byte strides (every other element) are different layouts for BLAS."""
    threads(2)
    rng = np.random.default_rng(7)
    a64, b64 = _r(rng, np.float64, 8, 64, 32), _r(rng, np.float64, 8, 64, 32)
    a32 = _r(rng, np.float32, 8, 64, 64)[..., ::2]
    b32 = _r(rng, np.float32, 8, 64, 64)[..., ::2]
    assert a32.strides == a64.strides
    for a, b in ((a64, b64), (a32, b32)):
        bt = b.swapaxes(-1, -2)
        got, _ = _product(a, bt)
        expect = np.matmul(a, bt)
        np.testing.assert_allclose(got, expect, rtol=1e-5, atol=1e-5 * np.abs(expect).max())


def test_thread_counts_give_the_same_bits(threads):
    """Where every count runs the batched kernel (a transposed B), the products are the same
    calls whichever thread runs them; the count may change between calls."""
    a, b = _cases(np.float32)["NT (q @ k^T)"]
    results = []
    for count in (1, 2, 1, 2):
        threads(count)
        got, calls = _product(a, b)
        assert calls == 1
        results.append(got)
    for got in results[1:]:
        np.testing.assert_array_equal(got, results[0])


def test_tensor_api_and_compiled_match_numpy(threads):
    """q @ k.transpose(-2, -1) through the Tensor API and compiled (ops_matmul.py copies each
    transposed B on its thread's stack), at 1 and 2 threads."""
    q, kt = _cases(np.float32)["NT (q @ k^T)"]
    k = np.ascontiguousarray(kt.swapaxes(-1, -2))
    expect = np.matmul(q, kt)
    f = llgrad.compile(lambda q, k: q @ k.transpose(-2, -1))
    for count in (1, 2):
        threads(count)
        eager = (llgrad.tensor(q) @ llgrad.tensor(k).transpose(-2, -1)).numpy()
        got = f(llgrad.tensor(q), llgrad.tensor(k)).numpy()
        for x in (eager, got):
            np.testing.assert_allclose(x, expect, rtol=1e-5, atol=1e-5 * np.abs(expect).max())
    # (the compiled product copies B^T first: gemm.py's transposing copy is called)
    assert "llgrad_transpose_float32" in str(f.dump(llgrad.tensor(q), llgrad.tensor(k),
                                                    llvm=True))


@pytest.mark.parametrize("compiled", [False, True])
def test_attention_forward_backward_match_torch(threads, compiled):
    torch = pytest.importorskip("torch")
    threads(2)
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((4, 4, 64, 32)).astype(np.float32) for _ in range(3))
    mask = np.triu(np.ones((64, 64), bool), 1)

    def attention(T, q, k, v, mask):
        s = (q @ k.transpose(-2, -1)) / 32 ** 0.5
        p = s.masked_fill(mask, float("-inf")).softmax(-1)
        y = p @ v
        return (y * y).sum()

    tq, tk, tv = (torch.tensor(x, requires_grad=True) for x in (q, k, v))
    attention(torch, tq, tk, tv, torch.tensor(mask)).backward()
    fn = llgrad.compile(lambda *a: attention(llgrad, *a)) if compiled else \
        (lambda *a: attention(llgrad, *a))
    for _ in range(2):      # (compiled: the second call runs the native code)
        lq, lk, lv = (llgrad.tensor(x, requires_grad=True) for x in (q, k, v))
        loss = fn(lq, lk, lv, llgrad.tensor(mask))
        loss.backward()
        eager_builds.wait()
    for mine, ref in ((lq, tq), (lk, tk), (lv, tv)):
        r = ref.grad.numpy()
        np.testing.assert_allclose(mine.grad.numpy(), r, rtol=1e-4, atol=1e-4 * np.abs(r).max())


def test_the_kernels_stack_slot_bounds_what_is_copied():
    from llgrad.codegen import eager_bgemm
    assert eager_gemm._BGEMM_PACK == eager_bgemm.PACK_LIMIT


def _pairs(dtype):
    rng = np.random.default_rng(5)
    x, w, g = (_r(rng, dtype, *s) for s in ((512, 128), (384, 128), (512, 384)))
    # a Linear's backward: g @ w (input's gradient) and g^T @ x (weight's), as fast_vjp asks
    return [(g, w), (g.T, x)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_linear_backward_products_as_compiled_code_runs_them(threads, dtype):
    """Eager's two backward products are the calls compiled code makes (each split over the
    threads by the shim), so their bits are compiled code's on every host (OpenBLAS's AVX2
    kernels give other bits for a product run whole than split)."""
    threads(2)
    rng = np.random.default_rng(5)
    x0, w0 = _r(rng, dtype, 512, 128), _r(rng, dtype, 384, 128)

    def run(fn):
        x, w = llgrad.tensor(x0, requires_grad=True), llgrad.tensor(w0, requires_grad=True)
        fn(x, w).backward()
        return x.grad.numpy(), w.grad.numpy()

    def f(x, w):
        return (llgrad.nn.functional.linear(x, w) ** 2).sum()
    run(f)
    eager_builds.wait()
    want = run(f)
    compiled = llgrad.compile(f)
    for _ in range(2):
        got = run(compiled)
    compiled.wait()
    got = run(compiled)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)


def test_linear_backward_at_two_threads_matches_torch(threads):
    torch = pytest.importorskip("torch")
    threads(2)
    rng = np.random.default_rng(6)
    x = rng.standard_normal((512, 128)).astype(np.float32)
    w = rng.standard_normal((384, 128)).astype(np.float32) * 0.1
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    (torch.nn.functional.linear(tx, tw) ** 2).sum().backward()
    for _ in range(2):      # (the first call may start the kernel's build)
        lx, lw = llgrad.tensor(x, requires_grad=True), llgrad.tensor(w, requires_grad=True)
        before = eager_gemm.stats["calls"]
        (llgrad.nn.functional.linear(lx, lw) ** 2).sum().backward()
        eager_builds.wait()
    assert eager_gemm.stats["calls"] - before >= 3       # (the forward, the two at once)
    for mine, ref in ((lx, tx), (lw, tw)):
        r = ref.grad.numpy()
        np.testing.assert_allclose(mine.grad.numpy(), r, rtol=1e-4, atol=1e-4 * np.abs(r).max())
