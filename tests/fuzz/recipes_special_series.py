# Fuzz recipes of torch.special's Bessel functions, orthogonal polynomials and zeta
# (llgrad/ir/ops_special_bessel.py), exec'd in programs.py's namespace (Gen, dom, RECIPES, ...).
# Compiled code calls their NumPy implementations back, so every backend agrees bit for bit.


def r_special_series(g):
    """A Bessel function, i0e / i1 / i1e, a polynomial of a small degree or zeta(x, q)."""
    x = g.need(lambda v: v.float)
    form = g.int(0, 3)
    if form == 0:
        fn = g.choice(("bessel_j0", "bessel_y1", "modified_bessel_k0", "airy_ai",
                       "spherical_bessel_j0"))
        text, op = f"llgrad.special.{fn}({dom(g, x, 'pos')})", "special_bessel"
    elif form == 1:
        fn = g.choice(("i0e", "i1", "i1e"))
        text, op = f"llgrad.special.{fn}({x})", "scaled_bessel_i"
    elif form == 2:
        fn = g.choice(("chebyshev_polynomial_t", "hermite_polynomial_he",
                       "legendre_polynomial_p", "shifted_chebyshev_polynomial_w"))
        text, op = f"llgrad.special.{fn}({dom(g, x, 'small')}, {g.choice((0, 3, 7))})", \
            "orthogonal_polynomial"
    else:
        q = dom(g, x, "pos")        # (no derivative in x: its x never requires grad)
        # (not for gradcheck: finite differences move the detached x with q, as r_detach)
        text = g.choice([f"llgrad.special.zeta(3.0, {q})"]
                        + ([] if g.smooth else [f"llgrad.special.zeta({q}.detach() + 1.5, {q})"]))
        op = "zeta"
    v = g.new(x.shape, x.dtype, rg=x.rg and op in ("scaled_bessel_i", "zeta"))
    g.emit(f"{v} = {text}", x)
    g.op(op)


RECIPES.update({
    r_special_series: (1, {"special_bessel", "scaled_bessel_i", "orthogonal_polynomial",
                           "zeta"}),
})
