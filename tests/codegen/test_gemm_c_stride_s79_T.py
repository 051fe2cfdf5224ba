"""A BLAS product whose C rows alias in the caches (a row stride a multiple of 16 KiB, 16 or
more rows, K at most 32: codegen/lowerings/gemm_c_stride.py) writes a padded scratch and
copies it into C. Checked: which products the rule takes (the plan), and values, forward and
backward, against torch and eager (the same BLAS products: bitwise equal to eager).

Measured for issue 20 (OpenBLAS sgemm64_ through ctypes, 1 thread, thread CPU, medians of 15
interleaved blocks, every GEMM of bench/real_models.py's six models): the four flag
combinations of each product (operands in either layout) and the transposed product (C^T =
B^T A^T) were within 10% of today's formulation on the transformer's linears (80-93
GFLOP/s, whichever), the LSTM/GRU input projections (K = 32: 73-80 whichever; the C^T
formulation 52-58) and weight gradients (TN 56-87: NN up to 1.27x on 384 x 32 x 1024, but
only with a 1.5 MB transposed copy of the gate gradients), attention's products (NT alone
slow, 45 against 68: already packed to NN) and the convolutions' im2col products. The one
class >= 10% apart with no operand copied: cnn_bn's input gradient of its linear (32 x 8192
x 10, C rows 32 KiB apart) at 26 GFLOP/s, 55 with C padded or transposed."""
import numpy as np
import pytest

import llgrad
from llgrad.codegen.lower import blas_available, plan_graph, simplify, small_gemm_bound
from llgrad.codegen.lowerings.gemm_c_stride import padded_ldc

torch = pytest.importorskip("torch")
RNG = np.random.default_rng(79)


@pytest.mark.parametrize("M,N,K,ld,want", [
    (32, 8192, 10, 8192, 8208),       # cnn_bn's linear input gradient
    (16, 4096, 32, 4096, 4112),
    (10, 8192, 32, 8192, None),       # few rows
    (32, 8192, 64, 8192, None),       # K long enough to hide C's misses
    (32, 2048, 10, 2048, None),       # 8 KiB rows: measured no gain
    (32, 6000, 10, 6000, None),       # not aliasing
    (32, 4096, 10, 8192, None),       # C not a fresh row-major buffer
])
def test_rule(M, N, K, ld, want):
    assert padded_ldc(M, N, K, 4, ld) == want


def _pads(entry):
    plan = plan_graph(simplify(entry.forward), {"blas": blas_available(),
                                                "small_gemm": small_gemm_bound()})
    return [g.state.get("c_pad") is not None for g in plan.groups
            if g.root is not None and g.root.op in ("mm", "matmul", "addmm", "linear")]


def _loss(lib, x, w, v, bias):
    # x @ w: (16, 8) @ (8, 4096) padded; its backward's products have 8 rows (not padded).
    # linear(h, v, bias): (16, 4096) -> 10; its input gradient, (16, 10) @ (10, 4096), is
    # padded in the backward (as cnn_bn's)
    h = lib.tanh(x @ w)
    y = lib.nn.functional.linear(h, v, bias)
    return (y * y).sum() + h.sum()


def _run(lib, f, arrays, calls=3):
    ts = [lib.tensor(a, requires_grad=True) for a in arrays]
    for _ in range(calls):
        for t in ts:
            t.grad = None
        loss = f(*ts)
        loss.backward()
        if hasattr(f, "wait"):
            f.wait()                # (LLGRAD_COMPILE=background: the next call is native)
    return [loss.detach().numpy()] + [t.grad.numpy() for t in ts]


@pytest.mark.skipif(not blas_available(), reason="the rule is for BLAS products")
def test_padded_products_match_torch_and_eager():
    arrays = [RNG.standard_normal((16, 8)).astype(np.float32),
              (RNG.standard_normal((8, 4096)) * 0.3).astype(np.float32),
              (RNG.standard_normal((10, 4096)) * 0.02).astype(np.float32),
              RNG.standard_normal(10).astype(np.float32)]
    cf = llgrad.compile(lambda *a: _loss(llgrad, *a))
    compiled = _run(llgrad, cf, arrays)
    assert cf.n_traces == 1 and not cf.graph_breaks
    assert _pads(cf.entries[-1])[:1] == [True]
    eager = _run(llgrad, lambda *a: _loss(llgrad, *a), arrays, calls=1)
    ref = _run(torch, lambda *a: _loss(torch, *a), arrays, calls=1)
    for c, e, r in zip(compiled, eager, ref):
        np.testing.assert_allclose(c, r, rtol=2e-5, atol=2e-5 * np.abs(r).max())
        np.testing.assert_allclose(c, e, rtol=1e-6, atol=1e-6 * np.abs(e).max())
