"""llgrad's own GEMM (codegen/lowerings/gemm.py): called directly at edge sizes and every layout it
takes, with guard zones around every buffer it writes; through kernels without a BLAS and
with LLGRAD_SMALL_GEMM; and from the disk cache in a fresh process (the kernel's object
file must find the library's symbol)."""
import ctypes
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from llgrad.codegen.lowerings import gemm
from llgrad.codegen.lower import lower
from llgrad.ir.builder import Builder
from llgrad.ir.graph import TensorType

GUARD = 64                      # elements of sentinel before and after each written buffer
SENTINEL = -12345.0


def _fn(dtype):
    gemm.ensure_library(dtype)
    addr = gemm._libraries[(dtype, "gemm")].address(f"llgrad_gemm_{dtype}")
    i, p = ctypes.c_int64, ctypes.c_void_p
    return ctypes.CFUNCTYPE(None, i, i, i, p, i, i, p, i, i, p, i, p, p)(addr)


def _guarded(n, dtype):
    """(whole buffer, the n elements between the guards)."""
    whole = np.full(n + 2 * GUARD, SENTINEL, dtype)
    return whole, whole[GUARD:GUARD + n]


def _call(dtype, M, N, K, a_layout, b_layout, rng, ldc_pad=3):
    a = rng.standard_normal((K, M) if a_layout == "T" else (M, K)).astype(dtype)
    b = rng.standard_normal((N, K) if b_layout == "T" else (K, N)).astype(dtype)
    A = a.T if a_layout == "T" else a
    B = b.T if b_layout == "T" else b
    ars, acs = (1, M) if a_layout == "T" else (K, 1)
    brs, bcs = (1, K) if b_layout == "T" else (N, 1)
    if M == 1:
        ars = 1
    if N == 1:
        bcs = 1
    ldc = N + ldc_pad
    c_whole, c = _guarded(M * ldc, dtype)
    na, nb = gemm.scratch_sizes(M, N, K, ars, bcs)
    sa_whole, sa = _guarded(na, dtype)
    sb_whole, sb = _guarded(nb, dtype)
    _fn(str(np.dtype(dtype)))(M, N, K, a.ctypes.data, ars, acs, b.ctypes.data, brs, bcs,
                              c.ctypes.data, ldc, sa.ctypes.data if na else None,
                              sb.ctypes.data if nb else None)
    got = c.reshape(M, ldc)
    want = A.astype(np.float64) @ B.astype(np.float64)
    eps = np.finfo(dtype).eps
    np.testing.assert_allclose(got[:, :N], want, rtol=0, atol=20 * eps * K * max(1, abs(want).max()))
    # nothing written outside C's rows, its row padding, or the scratch it was given
    assert (got[:, N:] == SENTINEL).all()
    for whole, n in ((c_whole, M * ldc), (sa_whole, na), (sb_whole, nb)):
        assert (whole[:GUARD] == SENTINEL).all() and (whole[GUARD + n:] == SENTINEL).all()


SIZES = [(1, 1, 1), (1, 33, 5), (7, 1, 3), (8, 32, 16), (9, 17, 1), (17, 70, 33), (8, 5, 2),
         (16, 48, 8), (33, 128, 10), (3, 31, 64)]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("layouts", ["NN", "NT", "TN", "TT"])
def test_direct_edges_and_layouts(dtype, layouts):
    rng = np.random.default_rng(1)
    for M, N, K in SIZES:
        _call(dtype, M, N, K, layouts[0], layouts[1], rng)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_transpose_direct(dtype):
    """The exported transposing copy: dst[k*N + n] = src[n*lds + k], every edge size
    around its 8 x 8 blocks, a row stride lds > K, and nothing written outside dst."""
    gemm.ensure_library(dtype, "transpose")
    addr = gemm._libraries[(dtype, "transpose")].address(gemm.transpose_name(dtype))
    i, p = ctypes.c_int64, ctypes.c_void_p
    fn = ctypes.CFUNCTYPE(None, p, i, p, i, i)(addr)
    rng = np.random.default_rng(3)
    for N, K in [(1, 1), (1, 9), (9, 1), (8, 8), (7, 15), (16, 24), (17, 33), (128, 10)]:
        lds = K + 5
        src = rng.standard_normal((N, lds)).astype(dtype)
        whole, dst = _guarded(K * N, dtype)
        fn(src.ctypes.data, lds, dst.ctypes.data, N, K)
        np.testing.assert_array_equal(dst.reshape(K, N), src[:, :K].T)
        assert (whole[:GUARD] == SENTINEL).all() and (whole[GUARD + K * N:] == SENTINEL).all()


def _mm_graph(dt, a_shape, b_shape, transpose_b):
    bld = Builder("mm")
    va = bld.input(TensorType(dt, a_shape))
    vb = bld.input(TensorType(dt, b_shape))
    if transpose_b:
        vb = bld.add("t", [vb], {}, view_of=vb)
    return bld.ret(bld.add("mm", [va, vb]))


@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_kernel_without_blas_and_forced(dt, monkeypatch):
    rng = np.random.default_rng(2)
    a = rng.standard_normal((12, 40)).astype(dt)
    w = rng.standard_normal((23, 40)).astype(dt)
    want = a.astype(np.float64) @ w.T.astype(np.float64)
    g = _mm_graph(dt, a.shape, w.shape, transpose_b=True)
    k = lower(g, blas=False)
    assert f"llgrad_gemm_{dt}" in k.ir_before and "cblas" not in k.ir_before
    np.testing.assert_allclose(k([a, w])[0], want, rtol=1e-4 if dt == "float32" else 1e-12)
    monkeypatch.setenv("LLGRAD_SMALL_GEMM", str(12 * 40 * 23))        # at the bound: small
    k = lower(g)
    assert f"llgrad_gemm_{dt}" in k.ir_before
    np.testing.assert_allclose(k([a, w])[0], want, rtol=1e-4 if dt == "float32" else 1e-12)
    monkeypatch.setenv("LLGRAD_SMALL_GEMM", str(12 * 40 * 23 - 1))    # above it: BLAS
    k = lower(g)
    if "cblas" in k.ir_before or "scipy_cblas" in k.ir_before:
        assert f"llgrad_gemm_{dt}" not in k.ir_before


@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_blas_with_transposed_b(dt):
    """With a BLAS, a small product whose B is a transposed view copies B to row-major
    first (the library's transpose): edge sizes, and a W whose rows are longer than K."""
    from llgrad.codegen.native import blas
    if not blas.gemm_symbols().get(dt):
        pytest.skip("no BLAS")
    rng = np.random.default_rng(4)
    for M, N, K in [(2, 1, 1), (5, 9, 7), (32, 128, 128), (3, 17, 33), (4, 10, 130)]:
        a = rng.standard_normal((M, K)).astype(dt)
        w_big = rng.standard_normal((N, K + 3)).astype(dt)
        bld = Builder("mm")
        va = bld.input(TensorType(dt, (M, K)))
        vw = bld.input(TensorType(dt, (N, K + 3)))
        vs = bld.add("slice", [vw], {"dim": 1, "start": 0, "end": K, "step": 1}, view_of=vw)
        vt = bld.add("t", [vs], {}, view_of=vs)
        k = lower(bld.ret(bld.add("mm", [va, vt])))
        # (one column, N == 1, is not a transposed layout to BLAS)
        assert (gemm.transpose_name(dt) in k.ir_before) == (N > 1)
        want = a.astype(np.float64) @ w_big[:, :K].T.astype(np.float64)
        np.testing.assert_allclose(k([a, w_big])[0], want,
                                   rtol=1e-4 if dt == "float32" else 1e-12, atol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("blas_env", ["0", "1"])
def test_disk_cache_links_the_library(tmp_path, blas_env):
    """A kernel loaded from the disk cache in a fresh process calls the library's GEMM (no
    BLAS) or its transpose (BLAS, x @ w.t()): the library must be in place before the
    object file is linked."""
    script = textwrap.dedent("""
        import numpy as np, llgrad
        from llgrad.codegen.native import jit
        def f(x, w):
            return (x @ w.t()).tanh().sum()
        cf = llgrad.compile(f, backend="llvm")
        x = llgrad.tensor(np.linspace(-1, 1, 6 * 40, dtype=np.float32).reshape(6, 40))
        w = llgrad.tensor(np.linspace(1, -1, 9 * 40, dtype=np.float32).reshape(9, 40))
        cf(x, w)
        cf.wait()                   # (LLGRAD_COMPILE=background: built by now)
        got = cf(x, w).item()
        want = float(np.tanh(x.numpy().astype(np.float64) @ w.numpy().T).sum())
        assert abs(got - want) < 1e-4 * abs(want), (got, want)
        print(jit.stats["loaded"], jit.stats["codegen"])
    """)
    env = dict(os.environ, LLGRAD_CACHE_DIR=str(tmp_path), LLGRAD_BLAS=blas_env)
    runs = [subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                           text=True, timeout=120) for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr
    loaded, codegen = map(int, runs[1].stdout.split())
    assert loaded >= 2 and codegen == 0          # the library and the kernel, both from disk
