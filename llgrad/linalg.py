"""llgrad.linalg: PyTorch's torch.linalg names llgrad has (the norms: llgrad/runtime/linalg.py;
the products: llgrad/runtime/functions_linalg.py; inv, det, slogdet:
llgrad/runtime/functions_matrix.py; solves and factorisations: functions_linalg_solve.py and
functions_linalg_ldl.py; qr, svd, eigh, eig and their compositions:
functions_linalg_spectral.py; the rest: functions_linalg_misc.py)."""
from .runtime import linalg as _norms
from .runtime.numpy_names import wrap_namespace as _wrap_numpy_names
from .runtime.out_args import with_out
from .runtime.functions_linalg import linalg_cross as cross  # noqa: F401
from .runtime.functions_linalg import matrix_power, multi_dot, vecdot  # noqa: F401
from .runtime.functions_matrix import LinAlgError, det as _det, inverse as _inverse  # noqa: F401
from .runtime.functions_matrix import linalg_slogdet  # noqa: E402
from .runtime.functions_linalg_solve import (  # noqa: F401,E402
    cholesky_ex, inv_ex, linalg_cholesky as cholesky, linalg_lu_solve as lu_solve, lu,
    lu_factor, lu_factor_ex, matrix_exp, solve, solve_ex, solve_triangular)
from .runtime.functions_linalg_spectral import (  # noqa: F401,E402
    cond, eig, eigh, eigvals, eigvalsh, lstsq, matrix_rank, pinv, qr, svd, svdvals)
from .runtime.functions_linalg_ldl import ldl_factor, ldl_factor_ex, ldl_solve  # noqa: F401,E402
from .runtime.functions_linalg_misc import (  # noqa: F401,E402
    diagonal, householder_product, matmul, tensorinv, tensorsolve, vander)


def det(A):
    """As torch.linalg.det: torch.det, whose argument PyTorch names A here, input there."""
    return _det(A)


def inv(A, *, out=None):
    """As torch.linalg.inv: torch.inverse, whose argument PyTorch names A here."""
    return _inverse(A, out=out)


# (their out= through PyTorch's checks and write; the names are PyTorch's in its errors, the
# composite matrix norms without its autograd check)
vector_norm = with_out(_norms.vector_norm, "linalg_vector_norm")
matrix_norm = with_out(_norms.matrix_norm, "linalg.matrix_norm", grad_check=False)
norm = with_out(_norms.norm, "linalg.norm", grad_check=False)
slogdet = with_out(linalg_slogdet, "_linalg_slogdet")

# (x= / a= / x1= for input=, x2= for other=: PyTorch's NumPy-style names, as llgrad.*'s)
_wrap_numpy_names(globals(), [_n for _n in list(globals()) if not _n.startswith("_")])
