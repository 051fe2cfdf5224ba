"""Native convolution (codegen/lowerings/ops_conv.py) beyond the op-table loops: the path
without a BLAS (llgrad's own GEMM, its accumulation for the weight gradient), and images
split among threads (per-chunk scratch, the weight gradient's partial sums), each against
the NumPy implementation or eager."""
import numpy as np
import pytest

import llgrad
import llgrad.nn.functional as F
from llgrad.codegen.lower import lower
from llgrad.ir import OPS, Builder, TensorType

ATTRS = {"stride": (2, 1), "padding": (1, 2), "dilation": (1, 2), "groups": 2}
CASES = {
    "convolution": ([(3, 4, 7, 6), (6, 2, 3, 2), (6,)], {}),
    "convolution_backward_input": ([(3, 6, 4, 8), (6, 2, 3, 2)], {"input_size": (7, 6)}),
    "convolution_backward_weight": ([(3, 6, 4, 8), (3, 4, 7, 6)],
                                    {"weight_size": (6, 2, 3, 2)}),
}


@pytest.mark.parametrize("dt", ["float32", "float64"])
@pytest.mark.parametrize("blas", [True, False])
@pytest.mark.parametrize("name", sorted(CASES))
def test_lowering_matches_numpy(name, blas, dt):
    shapes, extra = CASES[name]
    attrs = dict(ATTRS, **extra)
    rng = np.random.default_rng(5)
    arrays = [rng.standard_normal(s).astype(dt) for s in shapes]
    bld = Builder("conv")
    ins = [bld.input(TensorType(dt, s)) for s in shapes]
    k = lower(bld.ret(bld.add(name, ins, attrs)), blas=blas)
    assert ("cblas" in k.ir_before) == blas or not blas
    (got,) = k(arrays)
    want = OPS[name].impl(*arrays, **attrs)
    tol = 1e-4 if dt == "float32" else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())


def test_threads_agree_with_eager():
    """19 images (chunks of uneven size) on 1, 2 and 3 threads: loss and gradients as
    eager's, with groups and padding (the zeroed border of each chunk's columns)."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((19, 8, 16, 16)).astype(np.float32)
    w = rng.standard_normal((12, 4, 3, 3)).astype(np.float32)
    b = rng.standard_normal(12).astype(np.float32)

    def f(x, w, b):
        y = F.conv2d(x, w, b, 1, 1, 1, 2)
        return (y * y.detach().sin()).sum()

    def grads(fn):
        ts = [llgrad.tensor(a, requires_grad=True) for a in (x, w, b)]
        fn(*ts).backward()
        return [t.grad.numpy() for t in ts]

    want = grads(f)
    old = llgrad.get_num_threads()
    try:
        for threads in (1, 2, 3):
            llgrad.set_num_threads(threads)
            fn = llgrad.compile(f)
            grads(fn)                       # (the first call traces)
            for g, e in zip(grads(fn), want):
                np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-4 * np.abs(e).max())
    finally:
        llgrad.set_num_threads(old)
