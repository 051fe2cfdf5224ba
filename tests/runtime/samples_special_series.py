# Samples of torch.special's Bessel / polynomial / zeta ops (llgrad/ir/ops_special_bessel.py),
# exec'd in test_optable.py's namespace (S, Case, K, EXEMPT, Exempt, ...), from a generator
# of their own (the other files' inputs stay as they were).
_ss_rng = np.random.default_rng(20261204)


def _ssR(*shape):
    return np.asarray(_ss_rng.uniform(-9.0, 9.0, shape))


def _ssQ(*shape):
    """q of zeta(x, q): positive, away from 0."""
    return np.asarray(_ss_rng.uniform(0.5, 4.0, shape))


S("scaled_bessel_i",
  Case("i0e", lambda T, x: T.special.i0e(x), _ssR(2, 3), node="SpecialI0EBackward0"),
  Case("i1", lambda T, x: T.special.i1(x), _ssR(2, 3), node="SpecialI1Backward0"),
  Case("i1e_noncontig", lambda T, x: T.special.i1e(x.t()[:, ::2]), _ssR(3, 4),
       node="SpecialI1EBackward0"))
S("zeta",
  Case("tensors", lambda T, x, q: T.special.zeta(x, q), K(_ssQ(2, 3) + 1.2), _ssQ(2, 3),
       node="SpecialZetaBackward0"),
  Case("number_x", lambda T, q: T.special.zeta(2.5, q), _ssQ(4), node="SpecialZetaBackward1"),
  Case("bcast", lambda T, x, q: T.special.zeta(x, q), K(_ssQ(3, 1) + 1.5), _ssQ(4),
       node="SpecialZetaBackward0"))
_NO_GRAD = "PyTorch defines no derivative (the result does not require grad)"
EXEMPT.update({
    "special_bessel": Exempt(_NO_GRAD, lambda T, x: T.special.bessel_j1(x),
                             (_ssR(3),)),
    "orthogonal_polynomial": Exempt(
        _NO_GRAD, lambda T, x: T.special.chebyshev_polynomial_t(x / 9, 4), (_ssR(3),)),
})
FLOAT_WITHOUT_DERIVATIVE.update(("special_bessel", "orthogonal_polynomial"))
