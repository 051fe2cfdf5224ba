# Samples of torch.special's Bessel / polynomial / zeta ops (llgrad/ir/ops_special_bessel.py),
# exec'd in test_ir_core.py's namespace (S, T, X, P, SPECS, llgrad, ...): each adds to SPECS.
SPECS.update({
    "special_bessel": S([X(3, 4)], {"fn": "bessel_y1"},
                        lambda a: llgrad.special.bessel_y1(a)),
    "scaled_bessel_i": S([X(3, 4)], {"fn": "i1e"}, lambda a: llgrad.special.i1e(a)),
    "orthogonal_polynomial": S([X(3, 4), 5.0], {"fn": "legendre_polynomial_p"},
                               lambda a, n: llgrad.special.legendre_polynomial_p(a, n)),
    "zeta": S([P(3, 4), P(4)], {}, lambda a, b: llgrad.special.zeta(a, b)),
})
