"""Matrix products read subnormal operands as zero (codegen/native/denormals.py: the BLAS
shim sets MXCSR's DAZ and FTZ around each OpenBLAS call): a product whose operands are full
of subnormals gives NumPy's product of the operands with those zeroed, compiled and eagerly
at 2 threads; and nothing leaks: the caller's and the pool's threads compute subnormals
afterwards as NumPy does."""
import sys

import numpy as np
import pytest

import llgrad
from llgrad.codegen.native import denormals
from llgrad.compile import eager_builds
from llgrad.ir.np_matmul import matmul

pytestmark = pytest.mark.skipif(not (sys.platform.startswith("linux") and
                                     denormals.supported()), reason="x86-64 Linux")
TINY = np.finfo(np.float32).tiny


def _operands():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((256, 256)).astype(np.float32)
    b = rng.standard_normal((256, 96)).astype(np.float32)
    a[np.abs(a) < 1.0] = 3e-39          # two thirds of a: subnormal
    return a, b


def _zeroed(a):
    return np.where(np.abs(a) < TINY, np.float32(0), a)


def test_eager_product_reads_subnormals_as_zero(two_threads):
    a, b = _operands()
    matmul(a, b)
    eager_builds.wait()
    got = matmul(a, b)
    want = np.matmul(_zeroed(a), b)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    # (where the subnormals are all there is, the product is 0: DAZ, not a rounding)
    huge = np.full((256, 96), 1e30, np.float32)
    sub = np.full((256, 256), 3e-39, np.float32)
    assert (np.matmul(sub, huge) > 0).all()                 # (NumPy's: 7.7e-7 each)
    np.testing.assert_array_equal(matmul(sub, huge), np.zeros((256, 96), np.float32))


def test_compiled_product_and_gradient(two_threads):
    a, b = _operands()
    x = llgrad.tensor(a)
    w = llgrad.tensor(b, requires_grad=True)
    f = llgrad.compile(lambda x, w: (x @ w).tanh().sum())
    for _ in range(3):
        w.grad = None
        f(x, w).backward()
    y = llgrad.tensor(_zeroed(a))
    w2 = llgrad.tensor(b, requires_grad=True)
    (y @ w2).tanh().sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), w2.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_nothing_leaks_to_other_code(two_threads):
    """After products on the caller and the pool's workers, a NumPy multiply on the caller
    and a compiled elementwise kernel split over both threads still give subnormals."""
    a, b = _operands()
    for _ in range(3):
        matmul(a, b)
    eager_builds.wait()
    matmul(a, b)
    small = np.full(300_000, 1e-30, np.float32)
    assert (small * np.float32(1e-10) > 0).all()            # (the caller: no FTZ)
    f = llgrad.compile(lambda t: t * 1e-10)
    t = llgrad.tensor(small)
    for _ in range(3):
        out = f(t).numpy()
    np.testing.assert_array_equal(out, small * np.float32(1e-10))
    assert (out > 0).all()
