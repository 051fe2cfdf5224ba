"""vmap rules of the matrix ops (llgrad/ir/ops_matrix.py, ops_linalg_solve.py,
ops_linalg_spectral.py, ops_linalg_ldl.py): they already batch over leading dims, so the batch
dims go in front of the matrices (of every operand) and the op runs once."""
from ..runtime.dispatch import call
from .batching import rule


@rule("linalg_inv_ex", "linalg_det", "linalg_slogdet", "linalg_solve_ex",
      "linalg_solve_triangular", "cholesky_solve", "linalg_cholesky_ex", "linalg_lu_factor_ex",
      "lu_pivots_to_permutation", "linalg_matrix_exp", "linalg_qr", "linalg_svd", "linalg_eigh",
      "linalg_ldl_factor_ex", "linalg_ldl_solve")
def _leading(op, inputs, attrs, ctx):
    return ctx.wrap_all(call(op, tuple(ctx.full(x) for x in inputs), attrs))
