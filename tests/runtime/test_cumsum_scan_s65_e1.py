"""cumsum over a dimension that is not the innermost, on large arrays, as a loop of slice
adds (ir/np_cumsum.py): bitwise np.cumsum's values in the accumulation dtype (float32 summed
in float64), NaN / inf / -0 and strided or flipped inputs included, and the op's result and
gradient equal to torch's on the linear-attention shape that took 16 ms in NumPy's loop."""
import numpy as np
import pytest

import llgrad
from llgrad.ir import np_cumsum

RNG = np.random.default_rng(7)


def _with_specials(x):
    flat = x.reshape(-1)
    flat[::97], flat[5::101], flat[7::103], flat[9::89] = np.nan, np.inf, -np.inf, -0.0
    return x


@pytest.mark.parametrize("dtype,acc", [(np.float32, np.float64), (np.float64, None),
                                       (np.float16, np.float32), (np.int32, np.int64)])
@pytest.mark.parametrize("shape,dim", [((4, 4, 64, 8, 8), 2), ((64, 300), 0), ((8, 40, 50), 1),
                                       ((2, 5000, 3), 1), ((40, 3, 100), 0), ((300, 64), 1)])
def test_bitwise_numpys_cumsum(dtype, acc, shape, dim):
    x = (RNG.standard_normal(shape) * 100).astype(dtype)
    if x.dtype.kind == "f":
        x = _with_specials(x)
    for v in (x, np.flip(x, dim), x[:, ::2] if dim != 1 else x[::2]):
        with np.errstate(all="ignore"):
            want = np.cumsum(v, axis=dim, dtype=acc)
            got = np_cumsum.cumsum(v, dim, acc)
        assert got.dtype == want.dtype and got.shape == want.shape
        assert np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(want).tobytes()


def test_linear_attention_cumsum_matches_torch():
    torch = pytest.importorskip("torch")
    x = RNG.standard_normal((4, 2, 64, 16, 16)).astype(np.float32)
    g = RNG.standard_normal(x.shape).astype(np.float32)
    t, lx = torch.tensor(x, requires_grad=True), llgrad.tensor(x, requires_grad=True)
    ty, ly = t.cumsum(2), lx.cumsum(2)
    (ty * torch.tensor(g)).sum().backward()
    (ly * llgrad.tensor(g)).sum().backward()
    np.testing.assert_array_equal(ly.detach().numpy(), ty.detach().numpy())
    np.testing.assert_array_equal(lx.grad.numpy(), t.grad.numpy())
