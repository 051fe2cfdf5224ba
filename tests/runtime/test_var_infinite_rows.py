"""var / std over slices of one infinity are NaN, as PyTorch's (inf - inf), also beside
constant slices whose variance is set to exactly 0 (ops_reduce._zero_constant)."""
import numpy as np
import pytest

import llgrad

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("fn", ["var", "std"])
def test_infinite_slices_beside_constant_ones(dtype, fn):
    x = np.array([[-np.inf] * 3, [np.inf] * 3, [0.0] * 3, [2.0, 2.0, 2.0], [1.0, 2.0, 4.0]],
                 dtype=dtype)
    for dim in (-1, 0):
        got = getattr(llgrad.tensor(x), fn)(dim).numpy()
        want = getattr(torch.tensor(x), fn)(dim).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-6, equal_nan=True)
        assert np.array_equal(np.isnan(got), np.isnan(want))


def test_constant_slices_with_a_negative_dim():
    """The op's NumPy implementation as the IR interpreter calls it, dims as the node holds
    them (dim=-1): the constant-slice check indexes with them normalised."""
    from llgrad.ir.ops_reduce import _var64
    x = np.random.default_rng(0).random((4, 5, 67))
    x[0] = 1.0
    for dim, keepdim in (((-1,), False), (-1, True), ((0, -1), False)):
        got = _var64(x, dim, 1, keepdim)
        want = np.var(x, axis=dim, ddof=1, keepdims=keepdim)
        if dim != (0, -1):
            assert (got.reshape(4, -1)[0] == 0).all()
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)
