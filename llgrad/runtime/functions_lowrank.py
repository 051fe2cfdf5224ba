"""svd_lowrank and pca_lowrank: PyTorch's randomized low-rank SVD (Halko, Martinsson and
Tropp 2009, algorithms 4.4 and 5.1), written as torch/_lowrank.py writes it, with the same
tensor calls in the same order: llgrad draws PyTorch's random numbers, so a seeded call
gives PyTorch's factors up to the rounding of the QR and SVD (and their signs, LAPACK's)."""
from . import dtypes
from .creation import randn
from .functions import export, matmul
from .functions_linalg_spectral import qr, svd
from .tensor import Tensor


def _floating(A):
    """PyTorch's _linalg_utils.get_floating_dtype: A's floating dtype, float32 for others."""
    return A.dtype if A.dtype in (dtypes.float16, dtypes.float32, dtypes.float64) \
        else dtypes.float32


def _approximate_basis(A, q, niter=2, M=None):
    """Q with q orthonormal columns such that Q Q^H (A - M) approximates A - M."""
    niter = 2 if niter is None else niter
    R = randn(A.shape[-1], q, dtype=_floating(A))
    X = matmul(A, R)
    if M is not None:
        X = X - matmul(M, R)
    Q = qr(X).Q
    for _ in range(niter):
        X = matmul(A.mH, Q)
        if M is not None:
            X = X - matmul(M.mH, Q)
        Q = qr(X).Q
        X = matmul(A, Q)
        if M is not None:
            X = X - matmul(M, Q)
        Q = qr(X).Q
    return Q


def _svd_lowrank(A, q=6, niter=2, M=None):
    q = 6 if q is None else q
    m, n = A.shape[-2:]
    if M is not None:
        M = M.broadcast_to(A.size())
    if m < n:
        A = A.mH
        if M is not None:
            M = M.mH
    Q = _approximate_basis(A, q, niter=niter, M=M)
    B = matmul(Q.mH, A)
    if M is not None:
        B = B - matmul(Q.mH, M)
    U, S, Vh = svd(B, full_matrices=False)
    V = Vh.mH
    U = Q.matmul(U)
    if m < n:
        U, V = V, U
    return U, S, V


def svd_lowrank(A: Tensor, q: int | None = 6, niter: int | None = 2,
                M: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """(U, S, V) with A - M ~ U diag(S) V^H, of rank q, by a randomized method (seed the
    generator for repeatable results), as torch.svd_lowrank."""
    return _svd_lowrank(A, q=q, niter=niter, M=M)


def pca_lowrank(A: Tensor, q: int | None = None, center: bool = True,
                niter: int = 2) -> tuple[Tensor, Tensor, Tensor]:
    """The principal components of A's rows (centred unless center=False) as (U, S, V) of
    rank q (min(6, m, n) by default), as torch.pca_lowrank."""
    m, n = A.shape[-2:]
    if q is None:
        q = min(6, m, n)
    elif not (q >= 0 and q <= min(m, n)):
        raise ValueError(f"q(={q}) must be non-negative integer and not greater than "
                         f"min(m, n)={min(m, n)}")
    if not (niter >= 0):
        raise ValueError(f"niter(={niter}) must be non-negative integer")
    if not center:
        return _svd_lowrank(A, q, niter=niter, M=None)
    C = A.mean(dim=(-2,), keepdim=True)
    return _svd_lowrank(A - C, q, niter=niter, M=None)


export(svd_lowrank)
export(pca_lowrank)
