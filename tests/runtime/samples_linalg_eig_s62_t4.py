# Samples of linalg_eig (llgrad/ir/ops_linalg_spectral.py: complex results, eager only), exec'd
# in test_optable.py's namespace (S, Case, ...), from a generator of their own. Programs read
# the eigenvalues (real and imaginary parts) and the eigenvectors' moduli, which do not depend
# on the phase LAPACK leaves to each vector (a loss that does is refused, as in PyTorch).
_eig_rng = np.random.default_rng(20261206)


def _eigR(*shape):
    return np.asarray(_eig_rng.uniform(-1.5, 1.5, shape))


S("linalg_eig",
  Case("eigvals", lambda T, a: T.view_as_real(T.linalg.eigvals(a.reshape(2, 3, 3))), _eigR(18),
       node="ViewAsRealBackward0", top=False),
  Case("vector_moduli", lambda T, a: T.linalg.eig(a.reshape(4, 4)).eigenvectors.abs(),
       _eigR(16), node="AbsBackward0", top=False))
