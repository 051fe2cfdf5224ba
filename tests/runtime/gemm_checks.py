"""A check shared by the eager GEMM tests: a stack of products against its 2-D calls."""
import numpy as np

from llgrad.ir.np_matmul import matmul


def each_product(got, a, b):
    """got holds, per matrix of the broadcast stack, the bits the 2-D call gives for that
    product (the shim splits each product alone), within rounding of NumPy's stack (whose
    OpenBLAS threads split the products otherwise: on AVX2 hosts, other bits)."""
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    sa = np.broadcast_to(a, batch + a.shape[-2:])
    sb = np.broadcast_to(b, batch + b.shape[-2:])
    for idx in np.ndindex(*batch):
        np.testing.assert_array_equal(got[idx], matmul(sa[idx], sb[idx]))
    want = np.matmul(a, b)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
