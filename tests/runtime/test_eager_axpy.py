"""Eager add / sub with an alpha on the native kernel (compile/eager_axpy.py): bitwise the
exact NumPy emulation's and torch's single rounding of a + alpha * b (float32 and float64,
in place and not, add_ and sub_, NaN/inf/subnormal operands, alphas that round in float32),
and what it does not take (small, strided, mixed dtypes, broadcasting) keeps the emulation."""
import numpy as np
import pytest

import llgrad
from llgrad.compile import eager_axpy, eager_builds
from llgrad.ir import fused_madd


def _pair(dtype, n=6000, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(n).astype(dtype) * 3
    b = rng.standard_normal(n).astype(dtype)
    a[:6] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-39 if dtype == np.float32 else 1e-310]
    b[:6] = [1.0, -np.inf, 2.0, -0.0, 0.0, 3.0]
    return a, b


def _native(a, b, alpha, dtype):
    eager_axpy.axpy(a, b, alpha, np.dtype(dtype))
    eager_builds.wait()
    before = eager_axpy.stats["calls"]
    r = eager_axpy.axpy(a, b, alpha, np.dtype(dtype))
    assert eager_axpy.stats["calls"] == before + 1
    return r


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("alpha", [-0.01, 0.1, 3, -1e-3 / 3])
def test_bitwise_the_emulation(dtype, alpha):
    a, b = _pair(dtype)
    got = _native(a, b, alpha, dtype)
    want = np.asarray(fused_madd.fma(b, alpha, a, np.dtype(dtype)))
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_add_and_sub_in_place_match_torch(dtype):
    torch = pytest.importorskip("torch")
    a, b = _pair(getattr(np, dtype), seed=1)
    a, b = a[6:], b[6:]             # (torch's NaN payloads aside)
    for alpha in (-0.01, 0.37, 7):
        for name in ("add_", "sub_", "add", "sub"):
            res = []
            for L in (llgrad, torch):
                x, y = L.tensor(a.copy()), L.tensor(b.copy())
                out = getattr(x, name)(y, alpha=alpha)
                out = getattr(x, name)(y, alpha=alpha) if name.endswith("_") else out
                res.append(out.numpy().copy())
            np.testing.assert_array_equal(res[0], res[1], err_msg=f"{name} {alpha}")


def test_what_it_leaves_to_numpy():
    a, b = _pair(np.float32)
    f32 = np.dtype(np.float32)
    assert eager_axpy.axpy(a[:100], b[:100], 0.5, f32) is None            # small
    assert eager_axpy.axpy(a[::2], b[::2], 0.5, f32) is None              # strided
    assert eager_axpy.axpy(a, b.astype(np.float64), 0.5, f32) is None     # mixed
    assert eager_axpy.axpy(a.reshape(60, 100), b[:100], 0.5, f32) is None  # broadcast
    t = llgrad.tensor(a.reshape(60, 100))
    t.add_(llgrad.tensor(b[:100]), alpha=0.5)                             # still right
    want = np.asarray(fused_madd.fma(np.broadcast_to(b[:100], (60, 100)), 0.5,
                                     a.reshape(60, 100), f32))
    np.testing.assert_array_equal(t.numpy(), want)
