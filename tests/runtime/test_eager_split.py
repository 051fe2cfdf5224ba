"""Eager native kernels over llgrad's threads (compile/eager_threads.py, codegen/eager_split.py):
at 2 threads an eager GELU, sigmoid, erf, SiLU (and their backward loops), softmax and
log_softmax over a big tensor run as chunks on the pool, and give bitwise the results of
one thread (sizes that are and are not multiples of a chunk's alignment, float32 and
float64, Fortran order, rows that do not divide evenly), which stay within rounding of the
NumPy implementations; small tensors and one thread call the kernel directly."""
import numpy as np
import pytest

import llgrad
from llgrad.compile import eager_builds, eager_native, eager_threads
from llgrad.runtime import dispatch

F = llgrad.nn.functional
OPS = {
    "gelu": F.gelu,
    "gelu tanh": lambda t: F.gelu(t, approximate="tanh"),
    "sigmoid": llgrad.sigmoid,
    "silu": F.silu,
    "erf": llgrad.erf,
    "softmax": lambda t: F.softmax(t, -1),
    "log_softmax": lambda t: F.log_softmax(t, -1),
}


@pytest.fixture
def threads():
    old = llgrad.get_num_threads()
    yield llgrad.set_num_threads
    llgrad.set_num_threads(old)


def _run(fn, x):
    """fn(x) and d(sum(fn(x)^2))/dx as arrays, after a first call that starts (and here
    waits for) the kernels' builds."""
    def once():
        t = llgrad.tensor(x, requires_grad=True)
        y = fn(t)
        g, = llgrad.autograd.grad((y * y).sum(), t)
        return y.detach().numpy().copy(), g.numpy().copy()
    once()
    eager_builds.wait()
    return once()


@pytest.mark.parametrize("name", sorted(OPS))
@pytest.mark.parametrize("shape,dtype,order", [
    ((4096, 64), np.float32, "C"),
    ((1537, 64), np.float32, "C"),          # (elements: not a multiple of 64 * chunks)
    ((333, 301), np.float64, "C"),          # (rows of an odd length, unevenly split)
    ((256, 512), np.float32, "F"),
])
def test_two_threads_bitwise_one_thread(threads, name, shape, dtype, order):
    rng = np.random.default_rng(1)
    x = np.asarray(rng.standard_normal(shape) * 3, dtype=dtype, order=order)
    threads(1)
    one = _run(OPS[name], x)
    threads(2)
    before = eager_threads.stats["calls"]
    two = _run(OPS[name], x)
    if name.endswith("softmax") and order == "F":
        pass                    # (not contiguous along its rows: NumPy's implementation)
    else:
        assert eager_threads.stats["calls"] > before, "the call ran on one thread"
    for k, (a, b) in enumerate(zip(one, two)):
        assert a.dtype == b.dtype and a.shape == b.shape
        if k == 1 and name.endswith("softmax"):
            # (their backward is NumPy's and a product's, whose sums OpenBLAS orders by the
            # thread count: log_softmax's float64 gradient moves by ~1e-12 without any split)
            np.testing.assert_allclose(a, b, rtol=1e-12 if dtype == np.float64 else 1e-6)
        else:
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", sorted(OPS))
def test_split_results_near_numpy_impl(threads, name):
    """The chunks' results against the op table's NumPy implementation (the native hooks
    off), so a chunk computing the wrong elements cannot pass by agreeing with itself."""
    rng = np.random.default_rng(2)
    x = (rng.standard_normal((700, 96)) * 3).astype(np.float32)
    threads(2)
    got = _run(OPS[name], x)
    try:
        eager_native.install(False)
        want = _run(OPS[name], x)
    finally:
        eager_native.install(True)
    assert dispatch.native_eager is not None
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-5)   # (log_softmax near 0)


def test_small_and_one_thread_calls_stay_whole(threads):
    rng = np.random.default_rng(3)
    small = rng.standard_normal(2 * eager_threads.MIN_CHUNK - 1).astype(np.float32)
    big = rng.standard_normal(4 * eager_threads.MIN_CHUNK).astype(np.float32)
    threads(2)
    _run(F.gelu, small)
    before = eager_threads.stats["calls"]
    _run(F.gelu, small)
    assert eager_threads.stats["calls"] == before
    threads(1)
    _run(F.gelu, big)
    assert eager_threads.stats["calls"] == before
    assert eager_threads.chunks(big.size) == 1
    threads(2)
    assert eager_threads.chunks(big.size) == 4
    assert eager_threads.chunks(3 * eager_threads.MIN_CHUNK) == 3
