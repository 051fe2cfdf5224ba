"""The BLAS shim's split of one product over the threads (native/blas.py): chunks of C's
rows or columns, one a thread where OVERSPLIT's count would make them unequal (6 column
grains on 2 threads: 2 of 3). Every split computes each element of C in one BLAS call over
the whole inner dimension: results equal NumPy's float64 product to float32 rounding, for
1, 2 and 3 threads, and a call repeated at one thread count gives the same bits."""
import numpy as np
import pytest

import llgrad
from llgrad.codegen.native import blas

pytestmark = pytest.mark.skipif(not blas.gemm_symbols(), reason="no BLAS found")

# (m, k, n): column splits of 6 and 3 grains (64 columns each), row splits of 24 and 9
# grains (16 rows each), a transposed A as a weight gradient has it
SHAPES = [(128, 512, 384), (128, 256, 192), (384, 512, 128), (144, 128, 96), (96, 512, 320)]


@pytest.fixture
def restore_threads():
    old = llgrad.get_num_threads()
    yield
    llgrad.set_num_threads(old)


@pytest.mark.parametrize("m, k, n", SHAPES)
@pytest.mark.parametrize("transpose_a", [False, True])
def test_split_products_equal_numpy(restore_threads, m, k, n, transpose_a):
    rng = np.random.default_rng(m + n)
    a = rng.standard_normal((k, m) if transpose_a else (m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    want = (a.T if transpose_a else a).astype(np.float64) @ b.astype(np.float64)
    f = llgrad.compile((lambda a, b: a.t() @ b) if transpose_a else (lambda a, b: a @ b),
                       backend="llvm")
    for threads in (1, 2, 3):
        llgrad.set_num_threads(threads)
        first = f(llgrad.from_numpy(a), llgrad.from_numpy(b)).numpy().copy()
        again = f(llgrad.from_numpy(a), llgrad.from_numpy(b)).numpy()
        np.testing.assert_allclose(first, want, rtol=1e-4, atol=1e-3)
        assert np.array_equal(first, again)
