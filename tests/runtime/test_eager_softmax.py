"""Eager softmax and log_softmax over the last dim of a C-contiguous float tensor of 4096+
elements run one native loop per row (codegen/eager_softmax.py, compile/eager_native.py):
within a few ulps of the NumPy implementation (the same NaNs, infinities and zeros), and
against torch; other dims, layouts and sizes keep NumPy's implementation."""
import numpy as np
import pytest

import llgrad
from llgrad.compile import eager_builds, eager_native
from llgrad.ir import OPS
from llgrad.runtime import dispatch


def _numpy(op, x, dim):
    return OPS[op].impl(x, dim=dim)


def _data(shape, dtype, rng):
    x = (rng.standard_normal(shape) * 6).astype(dtype)
    flat = x.reshape(-1, shape[-1])
    flat[0, :3] = [np.inf, -np.inf, np.nan]        # a NaN row
    flat[1, :] = -np.inf                           # every entry -inf: NaN, as NumPy's
    flat[2, 5] = np.inf                            # one +inf: NaN where inf - inf
    flat[3, :] = 0                                 # all equal
    flat[4, 7] = 1e4                               # one dominating entry (exp underflows)
    return x


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
@pytest.mark.parametrize("shape", [(8, 4, 33, 65), (9, 500), (5, 4099)])
def test_native_rows_match_numpy(op, dtype, shape):
    x = _data(shape, dtype, np.random.default_rng(0))
    getattr(llgrad, op)(llgrad.tensor(x), -1)
    eager_builds.wait()     # (LLGRAD_COMPILE=background: the kernel is built before the run)
    before = eager_native.stats["calls"]
    got = getattr(llgrad, op)(llgrad.tensor(x), -1).numpy()
    assert eager_native.stats["calls"] == before + 1, "the native kernel did not run"
    want = _numpy(op, x, len(shape) - 1)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    eps = np.finfo(dtype).eps
    # softmax relative to each value, log_softmax to the row's scale (its values near 0
    # carry the absolute rounding of the max and log-sum terms)
    scale = np.abs(want) if op == "softmax" else np.maximum(np.abs(want), 1.0)
    assert np.all(np.abs(got - want)[ok] <= 8 * eps * scale[ok] + (got[ok] == want[ok]))


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_matches_torch_with_gradients(op):
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(1).standard_normal((64, 97)).astype(np.float32) * 3
    g = np.random.default_rng(2).standard_normal((64, 97)).astype(np.float32)
    out = []
    for lib in (torch, llgrad):
        t = lib.tensor(x, requires_grad=True)
        y = getattr(lib, op)(t, -1)
        y.backward(lib.tensor(g))
        out.append((y.detach().numpy(), t.grad.numpy(), type(y.grad_fn).__name__))
    np.testing.assert_allclose(out[1][0], out[0][0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out[1][1], out[0][1], rtol=1e-4, atol=1e-6)
    assert out[1][2] == out[0][2]


@pytest.mark.parametrize("case", ["other dim", "strided", "small", "float16"])
def test_other_cases_run_numpy(case):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((64, 96)).astype(np.float32)
    dim = -1
    if case == "other dim":
        dim = 0
    t = llgrad.tensor(x)
    if case == "strided":
        t = llgrad.tensor(np.ascontiguousarray(x.T)).t()
    elif case == "small":
        t = llgrad.tensor(x[:4])
    elif case == "float16":
        t = llgrad.tensor(x.astype(np.float16))
    before = eager_native.stats["calls"]
    got = llgrad.softmax(t, dim)
    assert eager_native.stats["calls"] == before
    prev = dispatch.set_native_eager(None)
    try:
        want = llgrad.softmax(t, dim)
    finally:
        dispatch.set_native_eager(prev)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
