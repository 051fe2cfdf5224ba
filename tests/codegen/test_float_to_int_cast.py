"""Float -> integer casts in native code give NumPy's values (and PyTorch's on x86) where the
value does not fit: NaN, infinities and values out of range become the smallest value of
int64, or of int32 wrapped to a narrower type; LLVM's fptosi alone gives poison there (a
geometric draw into int64 from a probability outside (0, 1) was garbage)."""
import numpy as np
import pytest

from llgrad.codegen.lower import lower
from llgrad.ir.builder import Builder
from llgrad.ir.graph import TensorType

VALUES = [np.nan, np.inf, -np.inf, 1e30, -1e30, 3e9, -3e9, 70000.5, -3.7, 2.0 ** 63,
          -2.0 ** 63, 2.0 ** 31, -2.0 ** 31, 2.0 ** 31 - 1, 255.9, -0.5, 9.2e18, 0.0, -0.0]


@pytest.mark.parametrize("src", ["float64", "float32"])
@pytest.mark.parametrize("dt", ["int64", "int32", "int16", "int8", "uint8"])
def test_out_of_range_as_numpy(src, dt):
    xs = np.array(VALUES).astype(src)
    bld = Builder("cast")
    v = bld.input(TensorType(src, xs.shape))
    (got,) = lower(bld.ret(bld.add("to_dtype", [v], {"dtype": dt})))([xs])
    with np.errstate(all="ignore"):
        want = xs.astype(dt)
    np.testing.assert_array_equal(got, want)
