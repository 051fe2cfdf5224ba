"""Linear solves and factorisations of (batches of) matrices, by LAPACK through NumPy where
NumPy has the routine, by BLAS trsm for triangular solves (blas_trsm.py) and by short NumPy
loops over the rows where neither applies (LU with partial pivoting), batched over leading
dims:

  linalg_solve_ex         (A, B; left, vector) -> (X, info)  torch.linalg.solve(_ex)
  linalg_solve_triangular (A, B; upper, left, unitriangular) -> X
  cholesky_solve          (B, L; upper) -> X with L L^T X = B (a full-matrix gradient for L)
  linalg_cholesky_ex      (A; upper) -> (L, info)
  linalg_lu_factor_ex     (A; pivot) -> (LU, pivots (int32, 1-based), info)
  lu_pivots_to_permutation (pivots) -> perm (int64): the row of LU each row of A is
                          (A = P L U with P[i, perm[i]] = 1); no gradient
  linalg_matrix_exp       (A) -> exp(A) (scaling and squaring with Pade 13, as PyTorch)

Native loops for linalg_solve_triangular and linalg_cholesky_ex on small matrices (codegen/
lowerings/ops_linalg.py: larger ones call these implementations back) and linalg_solve_ex
(codegen/lowerings/ops_linalg_solve.py); compiled code calls the others' implementations
back (native_host, codegen/lowerings/host_call.py). The VJP rules are PyTorch's
(tools/autograd/derivatives.yaml, FunctionsManual.cpp), written with the Tensor API and the
ops themselves, so they differentiate again."""
import numpy as np

from .blas_trsm import trsm
from .optable import defop


def _mT(t):
    return t.transpose(-2, -1)


def _info_shape(a):
    return np.zeros(a.shape[:-2], dtype=np.int32)


# ---- triangular solves ----------------------------------------------------------------------

def _trisolve(a, b, upper, unit, left=True, trans=False):
    """Solve op(a) x = b (left; x op(a) = b else; op(a) = a^T with trans) for triangular a
    (batched, broadcast): BLAS trsm, or back/forward substitution over the rows where it
    does not apply (a zero pivot gives inf/nan either way, as LAPACK's trtrs)."""
    shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    dt = np.result_type(a, b)
    x = np.array(np.broadcast_to(b, shape + b.shape[-2:]), dtype=dt, order="C")
    if trsm(a.astype(dt, copy=False), x, upper, left, trans, unit):
        return x
    if not left:    # (X op(A) = B is op(A)^T X^T = B^T: the other op of A, on the left)
        x, trans = np.swapaxes(x, -1, -2), not trans
    if trans:
        a, upper = np.swapaxes(a, -1, -2), not upper
    a = np.broadcast_to(a, shape + a.shape[-2:])
    n = a.shape[-1]
    rows = range(n - 1, -1, -1) if upper else range(n)
    with np.errstate(divide="ignore", invalid="ignore"):
        for i in rows:
            if upper:
                s = x[..., i, :] - np.einsum("...k,...kj->...j", a[..., i, i + 1:],
                                            x[..., i + 1:, :])
            else:
                s = x[..., i, :] - np.einsum("...k,...kj->...j", a[..., i, :i], x[..., :i, :])
            x[..., i, :] = s if unit else s / a[..., i, i][..., None]
    return np.ascontiguousarray(np.swapaxes(x, -1, -2)) if not left else x


def _solve_triangular(a, b, upper, left=True, unitriangular=False):
    return _trisolve(a, b, upper, unitriangular, left=left)


def _tri_mask(t, upper, unit):
    if upper:
        return t.triu(1 if unit else 0)
    return t.tril(-1 if unit else 0)


def _solve_triangular_vjp(c, g):
    a, x = c.self, c.result
    up, left, unit = c.upper, c.left, c.unitriangular
    gb = _mT(a)._op("linalg_solve_triangular", g, upper=not up, left=left, unitriangular=unit)
    ga = None
    if c.needs(0):
        ga = _tri_mask(-(gb.matmul(_mT(x)) if left else _mT(x).matmul(gb)), up, unit)
    return ga, gb if c.needs(1) else None


defop("linalg_solve_triangular", _solve_triangular, vjp=_solve_triangular_vjp,
      grad_fn="LinalgSolveTriangularBackward0", args=("self", "B"), save=("self", "result"),
      kind="other")


def _cholesky_solve(b, low, upper=False):
    """X with (L L^T) X = B (upper: U^T U) by two triangular solves reading one triangle."""
    y = _trisolve(low, b, upper, False, trans=upper)
    return _trisolve(low, y, upper, False, trans=not upper)


def _cholesky_solve_vjp(c, g):
    """PyTorch's cholesky_solve_backward: the factor's gradient is a full matrix (not masked
    to the triangle the forward reads), -(G X^H + X G^H) L with G = A^-1 g."""
    low, x = c.input2, c.result
    gb = g._op("cholesky_solve", low, upper=c.upper)
    gl = None
    if c.needs(1):
        t = gb.matmul(_mT(x))
        t = t + _mT(t)
        gl = -(low.matmul(t) if c.upper else t.matmul(low))
    return gb if c.needs(0) else None, gl


defop("cholesky_solve", _cholesky_solve, vjp=_cholesky_solve_vjp,
      grad_fn="CholeskySolveBackward0", args=("self", "input2"), save=("input2", "result"),
      kind="other", native_host=True)


# ---- general solves ---------------------------------------------------------------------------

def _solve_ex(a, b, left=True, vector=False):
    """(X, info): info per matrix as getrf's (the first zero pivot); a singular matrix's X is
    what its LU gives (inf/nan)."""
    if vector:
        b = b[..., None] if left else b[..., None, :]
    if not left:
        a, b = np.swapaxes(a, -1, -2), np.swapaxes(b, -1, -2)
    shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = np.broadcast_to(a, shape + a.shape[-2:])
    b = np.broadcast_to(b, shape + b.shape[-2:])
    try:
        x, info = np.linalg.solve(a, b), _info_shape(a)
    except np.linalg.LinAlgError:
        lu, piv, info = _lu_factor(a)
        perm = _pivots_to_perm(piv)
        pb = np.take_along_axis(b, _inverse(perm)[..., None], axis=-2)
        y = _trisolve(lu, pb, False, True)
        x = _trisolve(lu, y, True, False)
    if not left:
        x = np.ascontiguousarray(np.swapaxes(x, -1, -2))
    if vector:
        x = x[..., 0] if left else x[..., 0, :]
    return x, info


def _solve_vjp(c, gs):
    a, x, g = c.self, c.result0, gs[0]
    d = -1 if c.left else -2
    if c.vector:
        x, g = x.unsqueeze(d), g.unsqueeze(d)
    gb = _mT(a)._op("linalg_solve_ex", g, left=c.left, vector=False)[0]
    ga = None
    if c.needs(0):
        ga = -(gb.matmul(_mT(x)) if c.left else _mT(x).matmul(gb))
    if c.vector:
        gb = gb.squeeze(d)
    return ga, gb if c.needs(1) else None


defop("linalg_solve_ex", _solve_ex, vjp=_solve_vjp, grad_fn="LinalgSolveExBackward0",
      args=("self", "B"), save=("self", "result0"), nout=2, kind="other")


# ---- Cholesky ---------------------------------------------------------------------------------

def _cholesky_info(m):
    """potrf's info: the order of the first leading minor that is not positive-definite."""
    n = m.shape[-1]
    for k in range(1, n + 1):
        try:
            np.linalg.cholesky(m[:k, :k])
        except np.linalg.LinAlgError:
            return k
    return 0


def _cholesky_ex(a, upper=False):
    low = np.tril(a) + np.swapaxes(np.tril(a, -1), -1, -2)     # LAPACK reads one triangle
    info = _info_shape(a)
    try:
        r = np.linalg.cholesky(low)
    except np.linalg.LinAlgError:
        flat, finfo = low.reshape((-1,) + a.shape[-2:]), info.reshape(-1)
        r = np.zeros_like(flat)
        for i, m in enumerate(flat):
            finfo[i] = _cholesky_info(m)
            if not finfo[i]:
                r[i] = np.linalg.cholesky(m)
        r = r.reshape(a.shape)
    if upper:
        r = np.ascontiguousarray(np.swapaxes(r, -1, -2))
    return r, info


def _cholesky_vjp(c, gs):
    """PyTorch's cholesky_backward: L^-H Phi L^-1 with Phi = 0.5 (tril(L^H gL) + its strict
    lower part transposed)."""
    low, gl = c.result0, gs[0]
    if c.upper:
        low, gl = _mT(low), _mT(gl)
    ga = _mT(low).matmul(gl).tril()
    ga = 0.5 * (ga + _mT(ga.tril(-1)))
    ga = _mT(low)._op("linalg_solve_triangular", ga, upper=True, left=True,
                      unitriangular=False)
    return (low._op("linalg_solve_triangular", ga, upper=False, left=False,
                    unitriangular=False),)


defop("linalg_cholesky_ex", _cholesky_ex, vjp=_cholesky_vjp,
      grad_fn="LinalgCholeskyExBackward0", save=("result0",), nout=2, kind="other")


# ---- LU -----------------------------------------------------------------------------------------

def _lu_factor(a, pivot=True):
    """getrf, batched: (LU, 1-based int32 pivots, info)."""
    lu = np.array(a, dtype=a.dtype, order="C")      # (reshaped as a view below)
    m, n = lu.shape[-2:]
    k = min(m, n)
    batch = lu.reshape((int(np.prod(a.shape[:-2])), m, n))   # (-1: not when empty)
    piv = np.empty((batch.shape[0], k), dtype=np.int32)
    info = np.zeros(batch.shape[0], dtype=np.int32)
    idx = np.arange(batch.shape[0])
    with np.errstate(divide="ignore", invalid="ignore"):
        for j in range(k):
            p = j + (np.argmax(np.abs(batch[:, j:, j]), axis=1) if pivot else 0)
            piv[:, j] = p + 1
            rows = batch[idx, p].copy()
            batch[idx, p] = batch[:, j]
            batch[:, j] = rows
            d = batch[:, j, j]
            info = np.where((d == 0) & (info == 0), j + 1, info).astype(np.int32)
            batch[:, j + 1:, j] /= d[:, None]
            batch[:, j + 1:, j + 1:] -= batch[:, j + 1:, j, None] * batch[:, j, None, j + 1:]
    return (lu, piv.reshape(a.shape[:-2] + (k,)), info.reshape(a.shape[:-2]))


def _pivots_to_perm(piv, m=None):
    """perm with A = P L U, P[i, perm[i]] = 1 (LAPACK's row swaps applied in order)."""
    m = piv.shape[-1] if m is None else m
    flat = piv.reshape(int(np.prod(piv.shape[:-1])), piv.shape[-1])   # (-1: not when empty)
    perm = np.tile(np.arange(m, dtype=np.int64), (flat.shape[0], 1))
    rows = np.arange(flat.shape[0])
    for j in range(flat.shape[-1]):
        p = flat[:, j].astype(np.int64) - 1
        pj = perm[:, j].copy()
        perm[:, j] = perm[rows, p]
        perm[rows, p] = pj
    return _inverse(perm).reshape(piv.shape[:-1] + (m,))


def _inverse(perm):
    inv = np.empty_like(perm)
    np.put_along_axis(inv, perm, np.broadcast_to(np.arange(perm.shape[-1]), perm.shape), -1)
    return inv


defop("lu_pivots_to_permutation", lambda piv, m: _pivots_to_perm(piv, m), args=("pivots",),
      nondiff=("pivots",), kind="other", native_host=True)


def _lu_factor_vjp(c, gs):
    """PyTorch's linalg_lu_backward for square A: P L^-H (tril(L^H gL, -1) + triu(gU U^H))
    U^-H, with gL = tril(g, -1), gU = triu(g)."""
    lu, g = c.result0, gs[0]
    m, n = lu.shape[-2:]
    if m != n:
        ga = _lu_factor_vjp_wide(lu, g) if m < n else _lu_factor_vjp_tall(lu, g)
    else:
        low = lu.tril(-1) + _eye_like(lu)
        up = lu.triu()
        ga = _mT(low).matmul(g.tril(-1)).tril(-1) + g.triu().matmul(_mT(up)).triu()
        ga = _mT(up)._op("linalg_solve_triangular", ga, upper=False, left=False,
                         unitriangular=False)
        ga = _mT(low)._op("linalg_solve_triangular", ga, upper=True, left=True,
                          unitriangular=True)
    if c.pivot:
        perm = c.result1._op("lu_pivots_to_permutation", m=m)
        ga = ga.gather(-2, perm.unsqueeze(-1).expand(ga.shape))
    return (ga,)


def _lu_factor_vjp_wide(lu, g):
    """PyTorch's linalg_lu_backward for m < n, A = P L [U1 U2] (before P):
    L^-H [triu(gU1) + tril(L^H gL - gU U^H, -1) U1^-H, gU2]."""
    m = lu.shape[-2]
    low = lu[..., :m].tril(-1) + _eye_like(lu[..., :m])
    up, gu = lu.triu(), g.triu()
    ga = (_mT(low).matmul(g[..., :m].tril(-1)) - gu.matmul(_mT(up))).tril(-1)
    ga = _mT(up[..., :m])._op("linalg_solve_triangular", ga, upper=False, left=False,
                              unitriangular=False)
    ga = (ga + gu[..., :m])._op("cat", gu[..., m:], dim=len(ga.shape) - 1)
    return _mT(low)._op("linalg_solve_triangular", ga, upper=True, left=True,
                        unitriangular=True)


def _lu_factor_vjp_tall(lu, g):
    """PyTorch's linalg_lu_backward for m > n, A = P [L1; L2] U (before P):
    [tril(gL1, -1) + L1^-H triu(gU U^H - L^H gL), tril(gL2)] U^-H."""
    n = lu.shape[-1]
    low, gl = lu.tril(-1), g.tril(-1)
    low1 = low[..., :n, :] + _eye_like(lu[..., :n, :])
    up = lu[..., :n, :].triu()
    low_h_gl = _mT(low1).matmul(gl[..., :n, :]) + _mT(low[..., n:, :]).matmul(gl[..., n:, :])
    ga = (g[..., :n, :].triu().matmul(_mT(up)) - low_h_gl).triu()
    ga = _mT(low1)._op("linalg_solve_triangular", ga, upper=True, left=True,
                       unitriangular=True)
    ga = (ga + gl[..., :n, :])._op("cat", gl[..., n:, :], dim=len(ga.shape) - 2)
    return _mT(up)._op("linalg_solve_triangular", ga, upper=False, left=False,
                       unitriangular=False)


def _eye_like(t):
    n = t.shape[-1]
    return t.new_zeros((n,)).add(1).diag_embed() if n else t.new_zeros((0, 0))


defop("linalg_lu_factor_ex", _lu_factor, vjp=_lu_factor_vjp, grad_fn="LinalgLuFactorExBackward0",
      save=("result0", "result1"), nout=3, kind="other", native_host=True)


# ---- matrix exponential -----------------------------------------------------------------------

_PADE13 = (64764752532480000., 32382376266240000., 7771770303897600., 1187353796428800.,
           129060195264000., 10559470521600., 670442572800., 33522128640., 1323241920.,
           40840800., 960960., 16380., 182., 1.)


def _expm_one(a):
    n = a.shape[-1]
    norm = np.max(np.sum(np.abs(a), axis=0)) if n else 0.0
    if not np.isfinite(norm):
        return np.full_like(a, np.nan)
    s = max(0, int(np.ceil(np.log2(norm / 5.371920351148152)))) if norm > 0 else 0
    a = a / 2.0 ** s
    b, eye = _PADE13, np.eye(n, dtype=a.dtype)
    a2 = a @ a
    a4 = a2 @ a2
    a6 = a4 @ a2
    u = a @ (a6 @ (b[13] * a6 + b[11] * a4 + b[9] * a2) + b[7] * a6 + b[5] * a4 + b[3] * a2
             + b[1] * eye)
    v = a6 @ (b[12] * a6 + b[10] * a4 + b[8] * a2) + b[6] * a6 + b[4] * a4 + b[2] * a2 \
        + b[0] * eye
    r = np.linalg.solve(v - u, v + u)
    for _ in range(s):
        r = r @ r
    return r


def _matrix_exp(a):
    work = a.astype(np.float64).reshape((int(np.prod(a.shape[:-2])),) + a.shape[-2:])
    out = np.stack([_expm_one(m) for m in work]) if work.shape[0] else work
    return out.reshape(a.shape).astype(a.dtype)


def _matrix_exp_vjp(c, g):
    """PyTorch's backward_analytic_function_of_a_matrix: the upper right block of
    exp([[A^T, g], [0, A^T]])."""
    at = _mT(c.self)
    n, d = at.shape[-1], len(at.shape)
    top = at._op("cat", g, dim=d - 1)
    bottom = at.new_zeros(at.shape)._op("cat", at, dim=d - 1)
    big = top._op("cat", bottom, dim=d - 2)
    return (big._op("linalg_matrix_exp")[..., :n, n:],)


defop("linalg_matrix_exp", _matrix_exp, vjp=_matrix_exp_vjp, grad_fn="LinalgMatrixExpBackward0",
      save=("self",), kind="other", native_host=True)
