"""np.matmul for the op table's NumPy implementations, with the products whose inner
dimension is 1 (outer products: nn.Linear(1, n)'s forward, nn.Linear(n, 1)'s input
gradient, x[:, None] @ y[None, :]) made by a broadcast multiply. NumPy runs matmul over an
inner dimension of 1 on its own loop, not BLAS, at a fifth to a seventh of the speed of the
multiply (PyTorch's outer product was 12x llgrad's eager one). Each element is one product
either way, so the values are the same; the result is C-contiguous, as matmul's."""
import numpy as np

_matmul, _multiply = np.matmul, np.multiply
_F32 = np.dtype(np.float32)
# a product of matrices (or stacks of them) on llgrad's threads, or None: compile/eager_gemm.py
# sets it (ir imports no llvmlite). Each product is its own call, split over the threads as
# compiled code splits it: a matrix product's backward ran its two products at once, each
# unsplit, and OpenBLAS's AVX2 kernels give other bits for a product split than whole, so
# eager's gradients were not compiled code's (tests/runtime/test_eager_threads_adversary.py)
_threaded = [None]


def set_threaded(fn):
    """Route matrix products through fn(a, b, out) -> array or None (None: NumPy's); returns
    the previous hook."""
    prev, _threaded[0] = _threaded[0], fn
    return prev


def matmul(a, b, out=None):
    """np.matmul(a, b, out=out)."""
    if a.ndim >= 2 and b.ndim >= 2 and a.shape[-1] == 1 and b.shape[-2] == 1 and \
            a.dtype.kind in "fc" and b.dtype.kind in "fc":
        if out is None:
            return _multiply(a, b)
        return _multiply(a, b, out=out)
    if _threaded[0] is not None and a.ndim >= 2 and b.ndim >= 2:
        got = _threaded[0](a, b, out)
        if got is not None:
            return got
    if out is None and a.ndim == 2 and b.ndim == 2 and 16 <= a.shape[0] <= 64 and \
            b.shape[1] >= 64 and a.dtype == _F32 and b.dtype == _F32 and \
            a.flags.c_contiguous and b.flags.f_contiguous and not b.flags.c_contiguous:
        # x @ w.T (every Linear's forward): OpenBLAS's kernel for a transposed right operand
        # runs a few rows at 1.5x the time of (w @ x.T).T plus the copy back to rows (the
        # same products; on the hosts seen, the same bits)
        return _matmul(b.T, a.T).T.copy()
    return _matmul(a, b) if out is None else _matmul(a, b, out=out)
