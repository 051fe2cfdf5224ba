# Samples of the solves, factorisations and decompositions (llgrad/ir/ops_linalg_solve.py,
# ops_linalg_spectral.py: no native lowering, run on the interpreter), exec'd in
# test_optable.py's namespace (S, Case, K, EXEMPT, Exempt, ...), from a generator of their own.
# Inputs are flat (reshaped in the program), as samples_special.py's matrices; decompositions
# whose vectors have a sign left to LAPACK are compared through sign-invariant programs.
_la_rng = np.random.default_rng(20261202)


def _laM(*shape):
    """Well-conditioned square matrices (3 I plus noise), flattened."""
    return np.asarray(_la_rng.uniform(-1, 1, shape) + 3 * np.eye(shape[-1])).reshape(-1)


def _laR(*shape):
    return np.asarray(_la_rng.uniform(-1.5, 1.5, shape))


S("linalg_solve_ex",
  Case("plain", lambda T, a, b: T.linalg.solve(a.reshape(3, 3), b), _laM(3, 3), _laR(3, 2),
       node="LinalgSolveExBackward0"),
  Case("vector_batched", lambda T, a, b: T.linalg.solve(a.reshape(2, 3, 3), b), _laM(2, 3, 3),
       _laR(2, 3), node="LinalgSolveExBackward0"),
  Case("right_ex", lambda T, a, b: T.linalg.solve_ex(a.reshape(3, 3).mT, b, left=False).result,
       _laM(3, 3), _laR(2, 3), node="LinalgSolveExBackward0"))
S("linalg_solve_triangular",
  Case("upper", lambda T, a, b: T.linalg.solve_triangular(a.reshape(3, 3), b, upper=True),
       _laM(3, 3), _laR(3, 2), node="LinalgSolveTriangularBackward0"),
  Case("lower_right_unit", lambda T, a, b: T.linalg.solve_triangular(
      a.reshape(2, 3, 3), b, upper=False, left=False, unitriangular=True), _laM(2, 3, 3),
      _laR(2, 4, 3), node="LinalgSolveTriangularBackward0"))
S("cholesky_solve",      # (a triangular factor: the forward reads one triangle)
  Case("lower", lambda T, a, b: T.cholesky_solve(b, a.reshape(3, 3).tril()), _laM(3, 3),
       _laR(3, 2), node="CholeskySolveBackward0"),
  Case("upper_batched", lambda T, a, b: T.cholesky_solve(b, a.reshape(2, 3, 3).triu(),
                                                         upper=True),
       _laM(2, 3, 3), _laR(1, 3, 2), node="CholeskySolveBackward0"))
S("linalg_cholesky_ex",
  Case("lower", lambda T, a: T.linalg.cholesky(a.reshape(3, 3) @ a.reshape(3, 3).mT),
       _laM(3, 3), node="LinalgCholeskyExBackward0"),
  Case("upper_ex", lambda T, a: T.linalg.cholesky_ex(
      a.reshape(2, 3, 3) @ a.reshape(2, 3, 3).mT, upper=True).L, _laM(2, 3, 3),
      node="LinalgCholeskyExBackward0"))
S("linalg_lu_factor_ex",
  Case("lu_factor", lambda T, a: T.linalg.lu_factor(a.reshape(3, 3)).LU, _laR(9),
       node="LinalgLuFactorExBackward0"),
  Case("batched_ex", lambda T, a: T.linalg.lu_factor_ex(a.reshape(2, 3, 3))[0], _laR(18),
       node="LinalgLuFactorExBackward0"))
S("linalg_matrix_exp",
  Case("plain", lambda T, a: T.linalg.matrix_exp(a.reshape(3, 3)), _laR(9),
       node="LinalgMatrixExpBackward0"),
  Case("batched_method", lambda T, a: a.reshape(2, 2, 2).matrix_exp(), _laR(8),
       node="LinalgMatrixExpBackward0"))
S("linalg_qr",
  Case("tall", lambda T, a: tuple(T.linalg.qr(a.reshape(4, 3))), _laR(12),
       node="LinalgQrBackward0"),
  Case("wide_r", lambda T, a: T.linalg.qr(a.reshape(2, 2, 3)).R, _laR(12),
       node="LinalgQrBackward0"))
S("linalg_svd",
  Case("svdvals", lambda T, a: T.linalg.svdvals(a.reshape(2, 3, 4)), _laR(24),
       node="LinalgSvdBackward0"),
  Case("reconstruct", lambda T, a: (lambda u, s, vh: (u * s.unsqueeze(-2)) @ vh)(
      *T.linalg.svd(a.reshape(4, 3), full_matrices=False)), _laR(12),
       node="MmBackward0", top=False))
S("linalg_eigh",
  Case("eigvalsh", lambda T, a: T.linalg.eigvalsh(a.reshape(3, 3) + a.reshape(3, 3).mT),
       _laR(9), node="LinalgEighBackward0"),
  Case("projector", lambda T, a: (lambda w, v: v[..., :1] @ v[..., :1].mT)(
      *T.linalg.eigh(a.reshape(2, 3, 3) + a.reshape(2, 3, 3).mT)), _laR(18),
       node="UnsafeViewBackward0", top=False, torch_name=False))

EXEMPT["lu_pivots_to_permutation"] = Exempt(
    "integer permutation from LU's pivots (no gradient)",
    lambda T: T.lu_unpack(*T.linalg.lu_factor(T.tensor([[0., 1.], [2., 3.]])))[0].long(), ())
