"""The constraints on vectors and matrices (event_dim 1 or 2): multinomial counts, one-hot
vectors, the simplex, lower-triangular and Cholesky factors, square, symmetric and positive
(semi)definite matrices (re-exported by constraints.py, the public path)."""
from ..runtime.creation import full
from ..runtime.dtypes import bool_
from ..runtime.dtype_info import finfo
from ..runtime.functions import all as _all, isclose
from ..runtime.functions_linalg_solve import cholesky_ex
from ..runtime.functions_linalg_spectral import eigvalsh
from ..runtime.linalg import norm
from .constraints_base import Constraint


class _Multinomial(Constraint):
    """Nonnegative counts along the last dim summing to at most upper_bound (PyTorch's
    weaker check)."""
    is_discrete = True
    event_dim = 1

    def __init__(self, upper_bound):
        self.upper_bound = upper_bound

    def check(self, x):
        return (x >= 0).all(dim=-1) & (x.sum(dim=-1) <= self.upper_bound)


class _OneHot(Constraint):
    """One-hot vectors along the last dim."""
    is_discrete = True
    event_dim = 1

    def check(self, value):
        is_boolean = (value == 0) | (value == 1)
        is_normalized = value.sum(-1).eq(1)
        return is_boolean.all(-1) & is_normalized


class _Simplex(Constraint):
    """Nonnegative values along the last dim that sum to 1."""
    event_dim = 1

    def check(self, value):
        return _all(value >= 0, dim=-1) & ((value.sum(-1) - 1).abs() < 1e-6)


class _LowerCholesky(Constraint):
    """Lower-triangular square matrices with positive diagonals."""
    event_dim = 2

    def check(self, value):
        flat = (value.tril() == value).view(tuple(value.shape[:-2]) + (-1,))
        lower_triangular = flat.min(-1)[0]
        positive_diagonal = (value.diagonal(dim1=-2, dim2=-1) > 0).min(-1)[0]
        return lower_triangular & positive_diagonal


class _LowerTriangular(Constraint):
    event_dim = 2

    def check(self, value):
        flat = (value.tril() == value).view(tuple(value.shape[:-2]) + (-1,))
        return flat.min(-1)[0]


class _CorrCholesky(Constraint):
    """Lower Cholesky factors whose rows have unit length (of correlation matrices)."""
    event_dim = 2

    def check(self, value):
        tol = finfo(value.dtype).eps * value.size(-1) * 10
        row_norm = norm(value.detach(), dim=-1)
        return lower_cholesky.check(value) & (row_norm - 1.0).abs().le(tol).all(dim=-1)


class _Square(Constraint):
    event_dim = 2

    def check(self, value):
        return full(tuple(value.shape[:-2]), value.shape[-2] == value.shape[-1],
                    dtype=bool_)


class _Symmetric(_Square):
    def check(self, value):
        square_check = super().check(value)
        if not square_check.all():
            return square_check
        return isclose(value, value.mT, atol=1e-6).all(-2).all(-1)


class _PositiveSemidefinite(_Symmetric):
    def check(self, value):
        sym_check = super().check(value)
        if not sym_check.all():
            return sym_check
        return eigvalsh(value).ge(0).all(-1)


class _PositiveDefinite(_Symmetric):
    def check(self, value):
        sym_check = super().check(value)
        if not sym_check.all():
            return sym_check
        return cholesky_ex(value).info.eq(0)


lower_cholesky = _LowerCholesky()
