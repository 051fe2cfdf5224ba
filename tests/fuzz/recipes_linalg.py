# Recipes of the solves, factorisations and decompositions (llgrad/ir/ops_linalg_solve.py,
# ops_linalg_spectral.py), exec'd in programs.py's namespace (RECIPES, ...), on square matrices
# made well-conditioned (3 I + x), through sign-invariant results.


def r_linalg(g):
    """solve, solve_triangular, cholesky, lu_factor (+ lu_unpack's permutation), matrix_exp,
    qr's R, svdvals, eigvalsh, cholesky_solve of a well-conditioned square matrix."""
    x = g.pick(lambda v: v.float and len(v.shape) >= 2 and v.shape[-1] == v.shape[-2]
               and v.shape[-1] > 0)
    if x is None:
        n = g.int(1, 3)
        x = g.input(g.variant((2, n, n))[:-2] + (n, n) if g.chance(50) else (n, n))
    n = x.shape[-1]
    a = f"({x} + 3 * llgrad.eye({n}, dtype={x}.dtype))"
    form = g.int(0, 8)
    texts = [
        (f"llgrad.linalg.solve({a}, {x})", "linalg_solve_ex", x.shape),
        (f"llgrad.linalg.solve_triangular({a}, {x}, upper={g.chance(50)})",
         "linalg_solve_triangular", x.shape),
        (f"llgrad.linalg.cholesky({a} @ {a}.mT)", "linalg_cholesky_ex", x.shape),
        (f"llgrad.lu_unpack(*llgrad.linalg.lu_factor({a})).U", "linalg_lu_factor_ex", x.shape),
        (f"llgrad.linalg.matrix_exp({x} * 0.25)", "linalg_matrix_exp", x.shape),
        (f"llgrad.linalg.qr({a}).R.abs()", "linalg_qr", x.shape),
        (f"llgrad.linalg.svdvals({a})", "linalg_svd", x.shape[:-1]),
        (f"llgrad.linalg.eigvalsh({a} + {a}.mT)", "linalg_eigh", x.shape[:-1]),
        (f"llgrad.cholesky_solve({x}, {a}.tril())", "cholesky_solve", x.shape),
    ]
    text, op, shape = texts[form]
    v = g.new(shape, x.dtype, rg=x.rg)
    g.emit(f"{v} = {text}", x)
    g.op(op)
    if form == 3:                       # (lu_unpack's P from the pivots)
        g.op("lu_pivots_to_permutation")


RECIPES[r_linalg] = (1, {"linalg_solve_ex", "linalg_solve_triangular", "linalg_cholesky_ex",
                         "linalg_lu_factor_ex", "linalg_matrix_exp", "linalg_qr", "linalg_svd",
                         "linalg_eigh", "lu_pivots_to_permutation", "cholesky_solve"})
