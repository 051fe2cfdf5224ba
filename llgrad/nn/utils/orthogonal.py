"""torch.nn.utils.parametrizations.orthogonal: a matrix (or a batch of them) kept orthogonal
through the matrix exponential or the Cayley map of a skew-symmetric matrix, or a product
of Householder reflectors; by default on top of a base (the buffer `base`, PyTorch's
dynamic trivialization), so that the parametrized matrix starts out as the original's
orthogonalisation (its QR factor Q with diag(R) >= 0)."""
from enum import Enum, auto

import numpy as np

from ...runtime.creation import eye, randn, tensor as _tensor, zeros_like
from ...runtime.dtype_info import finfo
from ...runtime.functions import cat
from ...runtime.functions_linalg_misc import householder_product
from ...runtime.functions_linalg_solve import matrix_exp, solve
from ...runtime.functions_linalg_spectral import qr
from ...runtime.grad_mode import no_grad
from ..module import Module
from . import parametrize

__all__ = ["orthogonal"]


class _OrthMaps(Enum):
    matrix_exp = auto()
    cayley = auto()
    householder = auto()


def _is_orthogonal(Q):
    n, k = Q.size(-2), Q.size(-1)
    eps = 10.0 * n * finfo(Q.dtype).eps
    return bool((Q.mT @ Q).allclose(eye(k, dtype=Q.dtype), atol=eps))


def _make_orthogonal(A):
    """Q of A = QR (A tall) with diag(R) non-negative: geqrf's Householder product, each
    column signed by R's diagonal, as PyTorch's."""
    Q, R = qr(A)
    return Q * R.diagonal(dim1=-2, dim2=-1).sgn().unsqueeze(-2)


def _geqrf(A):
    """LAPACK's geqrf of each matrix of A: (R above the diagonal and the reflectors below,
    tau)."""
    a = A.detach().numpy()
    flat = a.reshape((-1,) + a.shape[-2:])
    xs, taus = [], []
    for m in flat:
        h, tau = np.linalg.qr(m, mode="raw")       # (h is the result transposed)
        xs.append(h.T)
        taus.append(tau)
    x = np.stack(xs).reshape(a.shape).astype(a.dtype)
    t = np.stack(taus).reshape(a.shape[:-2] + (min(a.shape[-2:]),)).astype(a.dtype)
    return _tensor(x), _tensor(t)


class _Orthogonal(Module):
    def __init__(self, weight, orthogonal_map, *, use_trivialization=True):
        super().__init__()
        self.shape = weight.shape
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, X):
        n, k = X.size(-2), X.size(-1)
        transposed = n < k
        if transposed:
            X = X.mT
            n, k = k, n
        if self.orthogonal_map in (_OrthMaps.matrix_exp, _OrthMaps.cayley):
            X = X.tril()
            if n != k:
                X = cat([X, X.new_zeros(n, n - k).expand(*X.shape[:-2], -1, -1)], dim=-1)
            A = X - X.mT
            if self.orthogonal_map == _OrthMaps.matrix_exp:
                Q = matrix_exp(A)
            else:
                Id = eye(n, dtype=A.dtype)
                Q = solve(Id.add(A, alpha=-0.5), Id.add(A, alpha=0.5))
            if n != k:
                Q = Q[..., :k]
        else:
            A = X.tril(diagonal=-1)
            tau = 2.0 / (1.0 + (A * A).sum(dim=-2))
            Q = householder_product(A, tau)
            Q = Q * X.diagonal(dim1=-2, dim2=-1).int().unsqueeze(-2)
        if hasattr(self, "base"):
            Q = self.base @ Q
        if transposed:
            Q = Q.mT
        return Q

    @no_grad()
    def right_inverse(self, Q):
        if Q.shape != self.shape:
            raise ValueError(f"Expected a matrix or batch of matrices of shape {self.shape}. "
                             f"Got a tensor of shape {Q.shape}.")
        Q_init = Q
        n, k = Q.size(-2), Q.size(-1)
        transpose = n < k
        if transpose:
            Q = Q.mT
            n, k = k, n
        if not hasattr(self, "base"):
            if self.orthogonal_map in (_OrthMaps.cayley, _OrthMaps.matrix_exp):
                raise NotImplementedError("It is not possible to assign to the matrix "
                                          "exponential or the Cayley parametrizations when "
                                          "use_trivialization=False.")
            A, tau = _geqrf(Q)
            A.diagonal(dim1=-2, dim2=-1).sign_()
            d = A.diagonal(dim1=-2, dim2=-1)
            d.copy_(d.where(tau != 0.0, -d))
            return A.mT if transpose else A
        if n == k:
            Q = Q.clone() if _is_orthogonal(Q) else _make_orthogonal(Q)
        else:
            N = randn(*(tuple(Q.size()[:-2]) + (n, n - k)), dtype=Q.dtype)
            Q = _make_orthogonal(cat([Q, N], dim=-1))
        self.base = Q
        neg_Id = zeros_like(Q_init)
        neg_Id.diagonal(dim1=-2, dim2=-1).fill_(-1.0)
        return neg_Id


def orthogonal(module, name="weight", orthogonal_map=None, *, use_trivialization=True):
    """Make module.<name> orthogonal (orthonormal columns, or rows for a wide matrix) through
    orthogonal_map "matrix_exp", "cayley" or "householder" (default: matrix_exp for a
    square matrix, householder otherwise), as torch.nn.utils.parametrizations.orthogonal."""
    weight = getattr(module, name, None)
    if not hasattr(weight, "ndim"):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.ndim < 2:
        raise ValueError("Expected a matrix or batch of matrices. "
                         f"Got a tensor of {weight.ndim} dimensions.")
    if orthogonal_map is None:
        orthogonal_map = "matrix_exp" if weight.size(-2) == weight.size(-1) else "householder"
    orth_enum = getattr(_OrthMaps, orthogonal_map, None)
    if orth_enum is None:
        raise ValueError('orthogonal_map has to be one of "matrix_exp", "cayley", '
                         f'"householder". Got: {orthogonal_map}')
    orth = _Orthogonal(weight, orth_enum, use_trivialization=use_trivialization)
    parametrize.register_parametrization(module, name, orth, unsafe=True)
    return module
