"""ir/libm_np.py: glibc's functions elementwise. Float32 exp takes float64's exp rounded
wherever glibc's error bound makes that expf's result, and libm's call elsewhere: the bits
must be expf's own, called element by element, everywhere (normal, subnormal, overflowing,
non-finite and 0-d operands)."""
import numpy as np
import pytest

from llgrad.ir import libm_np


@pytest.mark.skipif(libm_np._LIB is None, reason="no C math library found")
def test_float32_exp_is_expfs_bits():
    rng = np.random.default_rng(7)
    x = np.concatenate([rng.uniform(-110.0, 92.0, 200_000), rng.standard_normal(100_000) * 4,
                        np.float32(1e-3) * rng.standard_normal(10_000),
                        [0.0, -0.0, np.nan, np.inf, -np.inf, 88.72, 88.73, -87.33, -103.9,
                         -104.1, 1e-30, -1e-30]]).astype(np.float32)
    got = libm_np.libm("exp", x)
    want = libm_np._call("exp", np.dtype(np.float32), x)
    same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
    assert same.all(), x[~same][:10]
    assert got.dtype == np.float32 and got.shape == x.shape


def test_shapes_and_0d():
    assert libm_np.libm("exp", np.ones((2, 3), np.float32)).shape == (2, 3)
    r = libm_np.libm("exp", np.array(np.float32(-200.0)))
    assert r.shape == () and r.dtype == np.float32 and r == 0
