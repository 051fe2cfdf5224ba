"""llgrad.linalg's solves, factorisations and decompositions (llgrad/ir/ops_linalg_solve.py,
ops_linalg_spectral.py; runtime/functions_linalg_*.py): gradcheck and gradgradcheck in float64
(no PyTorch needed), llgrad.compile, and, when PyTorch is installed, values, named tuples,
gradients and errors against PyTorch in float32 and float64."""
import numpy as np
import pytest

import llgrad

try:
    import torch
except ImportError:         # the PyTorch comparisons skip
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")

rng = np.random.default_rng(4321)


def _sq(*shape):
    """Well-conditioned square matrices."""
    return rng.standard_normal(shape) + 3 * np.eye(shape[-1])


def _spd(*shape):
    a = rng.standard_normal(shape)
    return a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])


def _t(a):
    return llgrad.tensor(a, dtype=llgrad.float64, requires_grad=True)


def _sym(a):
    return a + a.mT


# ---- gradcheck: programs of llgrad only (float64) -----------------------------------------------

GRAD_PROGRAMS = {
    "solve": (lambda A, B: llgrad.linalg.solve(A, B), [_sq(2, 3, 3), rng.standard_normal((2, 3, 2))]),
    "solve_vector": (lambda A, b: llgrad.linalg.solve(A, b), [_sq(3, 3), rng.standard_normal(3)]),
    "solve_right": (lambda A, B: llgrad.linalg.solve(A, B, left=False),
                    [_sq(3, 3), rng.standard_normal((2, 3))]),
    "solve_bcast": (lambda A, B: llgrad.linalg.solve(A, B), [_sq(2, 3, 3), rng.standard_normal((3, 2))]),
    "solve_triangular_upper": (lambda A, B: llgrad.linalg.solve_triangular(A.triu(), B, upper=True),
                               [_sq(3, 3), rng.standard_normal((3, 2))]),
    "solve_triangular_right_unit": (
        lambda A, B: llgrad.linalg.solve_triangular(A, B, upper=False, left=False,
                                                    unitriangular=True),
        [_sq(2, 3, 3), rng.standard_normal((2, 4, 3))]),
    "cholesky": (lambda A: llgrad.linalg.cholesky(A.matmul(A.mT) + llgrad.eye(3, dtype=A.dtype)),
                 [_sq(2, 3, 3)]),
    "cholesky_upper": (lambda A: llgrad.linalg.cholesky(_sym(A) + 9 * llgrad.eye(3, dtype=A.dtype),
                                                        upper=True), [_sq(3, 3)]),
    "qr_tall": (lambda A: tuple(llgrad.linalg.qr(A)), [rng.standard_normal((4, 3))]),
    "qr_wide": (lambda A: tuple(llgrad.linalg.qr(A)), [rng.standard_normal((2, 3, 4))]),
    "qr_complete_square": (lambda A: tuple(llgrad.linalg.qr(A, "complete")), [_sq(3, 3)]),
    "svd_tall": (lambda A: (lambda u, s, v: (u.abs(), s, v.abs()))(
        *llgrad.linalg.svd(A, full_matrices=False)), [rng.standard_normal((4, 3))]),
    "svd_wide_full": (lambda A: (lambda u, s, vh: (u[..., :2] * vh[..., :2, :1].sign().mT, s))(
        *llgrad.linalg.svd(A)), [rng.standard_normal((2, 2, 3))]),
    "svdvals": (lambda A: llgrad.linalg.svdvals(A), [rng.standard_normal((2, 3, 4))]),
    "eigh": (lambda A: (lambda w, v: (w, v * v[..., :1, :].sign()))(*llgrad.linalg.eigh(_sym(A))),
             [rng.standard_normal((2, 3, 3))]),
    "eigh_upper": (lambda A: llgrad.linalg.eigh(_sym(A), UPLO="U")[1].abs(), [rng.standard_normal((3, 3))]),
    "eigvalsh": (lambda A: llgrad.linalg.eigvalsh(_sym(A)), [rng.standard_normal((3, 3))]),
    "lu_factor": (lambda A: llgrad.linalg.lu_factor(A).LU, [rng.standard_normal((2, 4, 4))]),
    "lu": (lambda A: tuple(llgrad.linalg.lu(A))[1:], [rng.standard_normal((3, 3))]),
    "lu_solve": (lambda A, B: llgrad.linalg.lu_solve(*llgrad.linalg.lu_factor(A), B),
                 [rng.standard_normal((2, 3, 3)), rng.standard_normal((2, 3, 2))]),
    "lu_solve_adjoint_right": (
        lambda A, B: llgrad.linalg.lu_solve(*llgrad.linalg.lu_factor(A), B, adjoint=True,
                                            left=False),
        [rng.standard_normal((3, 3)), rng.standard_normal((2, 3))]),
    "matrix_exp": (lambda A: llgrad.linalg.matrix_exp(A), [rng.standard_normal((2, 3, 3))]),
    "pinv": (lambda A: llgrad.linalg.pinv(A), [rng.standard_normal((4, 3))]),
    "pinv_hermitian": (lambda A: llgrad.linalg.pinv(_sym(A), hermitian=True), [_sq(3, 3)]),
    "lstsq": (lambda A, B: llgrad.linalg.lstsq(A, B).solution,
              [rng.standard_normal((5, 3)), rng.standard_normal((5, 2))]),
    "inv_ex": (lambda A: llgrad.linalg.inv_ex(A).inverse, [_sq(3, 3)]),
    "cond": (lambda A: llgrad.linalg.cond(A), [_sq(3, 3)]),
    "cond_fro": (lambda A: llgrad.linalg.cond(A, "fro"), [_sq(3, 3)]),
    "householder_product": (lambda A, tau: llgrad.linalg.householder_product(A, tau),
                            [rng.standard_normal((4, 3)), rng.standard_normal(2)]),
    "tensorinv": (lambda A: llgrad.linalg.tensorinv(A.reshape(2, 3, 6), ind=2), [_sq(6, 6)]),
    "tensorsolve": (lambda A, B: llgrad.linalg.tensorsolve(A.reshape(2, 3, 6), B),
                    [_sq(6, 6), rng.standard_normal((2, 3))]),
    "vander": (lambda x: llgrad.linalg.vander(x, N=4), [rng.standard_normal(3)]),
    "cholesky_solve": (lambda B, L: llgrad.cholesky_solve(B, L.tril() + 3 * llgrad.eye(3, dtype=L.dtype)),
                       [rng.standard_normal((3, 2)), rng.standard_normal((3, 3))]),
    "cholesky_inverse": (lambda L: llgrad.cholesky_inverse(L.triu() + 3 * llgrad.eye(3, dtype=L.dtype),
                                                           upper=True), [rng.standard_normal((3, 3))]),
    "triangular_solve": (lambda B, A: tuple(llgrad.triangular_solve(B, A.triu(), transpose=True)),
                         [rng.standard_normal((3, 2)), _sq(3, 3)]),
}


@pytest.mark.parametrize("name", sorted(GRAD_PROGRAMS))
def test_gradcheck(name):
    fn, arrays = GRAD_PROGRAMS[name]
    xs = [_t(a) for a in arrays]
    assert llgrad.autograd.gradcheck(fn, xs, atol=1e-5, rtol=1e-3)


@pytest.mark.parametrize("name", ["solve", "solve_triangular_upper", "cholesky", "qr_tall",
                                  "svdvals", "eigh", "lu_factor", "matrix_exp", "pinv"])
def test_gradgradcheck(name):
    fn, arrays = GRAD_PROGRAMS[name]
    xs = [_t(a) for a in arrays]
    assert llgrad.autograd.gradgradcheck(fn, xs, atol=1e-5, rtol=1e-3)


@pytest.mark.filterwarnings("ignore:.*runs on the interpreter")
@pytest.mark.parametrize("backend", ["interpret", "llvm"])
def test_compile_runs_the_ops(backend):
    def f(A, B):
        x = llgrad.linalg.solve(A, B)
        q, r = llgrad.linalg.qr(A)
        s = llgrad.linalg.svdvals(A)
        w = llgrad.linalg.eigvalsh(A + A.mT)
        lu, piv = llgrad.linalg.lu_factor(A)
        e = llgrad.linalg.matrix_exp(A * 0.1)
        c = llgrad.linalg.cholesky(A.matmul(A.mT))
        t = llgrad.linalg.solve_triangular(r, B, upper=True)
        return (x.sum() + r.sum() + s.sum() + w.sum() + lu.sum() + e.sum() + c.sum() + t.sum()
                + llgrad.linalg.lu_solve(lu, piv, B).sum())
    A, B = _sq(3, 3), rng.standard_normal((3, 2))
    cf = llgrad.compile(f, backend=backend)
    for _ in range(2):
        xa, xb = _t(A), _t(B)
        ya, yb = _t(A), _t(B)
        got, want = cf(xa, xb), f(ya, yb)
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-10)
        got.backward()
        want.backward()
        np.testing.assert_allclose(xa.grad.numpy(), ya.grad.numpy(), rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(xb.grad.numpy(), yb.grad.numpy(), rtol=1e-8, atol=1e-10)


def test_named_tuples_and_aliases():
    A = llgrad.tensor(_sq(3, 3))
    assert llgrad.linalg.qr(A)._fields == ("Q", "R")
    assert llgrad.linalg.svd(A)._fields == ("U", "S", "Vh")
    assert llgrad.svd(A)._fields == ("U", "S", "V")
    assert llgrad.linalg.eigh(A)._fields == ("eigenvalues", "eigenvectors")
    assert llgrad.linalg.lstsq(A, A)._fields == ("solution", "residuals", "rank",
                                                  "singular_values")
    assert llgrad.linalg.lu(A)._fields == ("P", "L", "U")
    assert llgrad.linalg.lu_factor(A)._fields == ("LU", "pivots")
    assert llgrad.linalg.solve_ex(A, A)._fields == ("result", "info")
    assert llgrad.linalg.cholesky_ex(A)._fields == ("L", "info")
    P, L, U = llgrad.linalg.lu(A)
    np.testing.assert_allclose((P @ L @ U).numpy(), A.numpy(), atol=1e-12)
    for name in ("svd", "qr", "cholesky", "cholesky_solve", "cholesky_inverse", "pinverse",
                 "triangular_solve", "matrix_exp", "lu", "lu_solve", "lu_unpack", "orgqr"):
        assert callable(getattr(llgrad, name)), name


# ---- against PyTorch ----------------------------------------------------------------------------

def _lib_inputs(lib, arrays, dtype):
    return [lib.tensor(a.astype(dtype), requires_grad=a.dtype.kind == "f") for a in arrays]


def _flat(out):
    if isinstance(out, (tuple, list)):
        return [x for o in out for x in _flat(o)]
    return [out]


def _svd_signs(u, s, vh):
    """U's columns and Vh's rows with U's first row made non-negative: LAPACK builds may pick
    other signs (the gradient of a sign-invariant loss is the same)."""
    k = s.shape[-1]
    sign = u[..., :1, :k].sign()
    return u[..., :, :k] * sign, s, vh[..., :k, :] * sign.mT


def _eigh_signs(w, v):
    return w, v * v[..., :1, :].sign()


# name -> (program(lib, *tensors), inputs)
TORCH_PROGRAMS = {
    "solve": (lambda T, A, B: T.linalg.solve(A, B), [_sq(2, 3, 3), rng.standard_normal((3, 2))]),
    "solve_vec": (lambda T, A, b: T.linalg.solve(A, b), [_sq(2, 3, 3), rng.standard_normal((2, 3))]),
    "solve_right": (lambda T, A, B: T.linalg.solve(A, B, left=False), [_sq(2, 3, 3), rng.standard_normal((2, 4, 3))]),
    "solve_ex": (lambda T, A, B: T.linalg.solve_ex(A, B), [_sq(3, 3), rng.standard_normal((3, 2))]),
    "solve_triangular": (lambda T, A, B: T.linalg.solve_triangular(A, B, upper=False),
                         [_sq(2, 3, 3), rng.standard_normal((2, 3, 4))]),
    "solve_triangular_right": (lambda T, A, B: T.linalg.solve_triangular(
        A, B, upper=True, left=False, unitriangular=True), [_sq(3, 3), rng.standard_normal((2, 3))]),
    "cholesky": (lambda T, A: T.linalg.cholesky(A @ A.mT + T.eye(3, dtype=A.dtype)), [rng.standard_normal((2, 3, 3))]),
    "cholesky_ex_upper": (lambda T, A: T.linalg.cholesky_ex(A @ A.mT + T.eye(3, dtype=A.dtype), upper=True),
                          [rng.standard_normal((3, 3))]),
    "torch_cholesky": (lambda T, A: T.cholesky(A @ A.mT + T.eye(3, dtype=A.dtype)), [rng.standard_normal((3, 3))]),
    "qr": (lambda T, A: T.linalg.qr(A), [rng.standard_normal((2, 4, 3))]),
    "qr_wide": (lambda T, A: T.linalg.qr(A), [rng.standard_normal((3, 5))]),
    "qr_complete": (lambda T, A: T.linalg.qr(A.detach(), mode="complete").Q, [rng.standard_normal((4, 2))]),
    "qr_complete_wide": (lambda T, A: T.linalg.qr(A, mode="complete"), [rng.standard_normal((2, 4))]),
    "qr_r": (lambda T, A: T.linalg.qr(A.detach(), mode="r"), [rng.standard_normal((4, 3))]),
    "torch_qr": (lambda T, A: T.qr(A, some=False), [rng.standard_normal((3, 3))]),
    "svd": (lambda T, A: _svd_signs(*T.linalg.svd(A, full_matrices=False)), [rng.standard_normal((2, 4, 3))]),
    "svd_full": (lambda T, A: _svd_signs(*T.linalg.svd(A))[1:], [rng.standard_normal((3, 5))]),
    "svdvals": (lambda T, A: T.linalg.svdvals(A), [rng.standard_normal((2, 3, 5))]),
    "torch_svd": (lambda T, A: (lambda u, s, v: _svd_signs(u, s, v.mT))(*T.svd(A)),
                  [rng.standard_normal((4, 3))]),
    "torch_svd_no_uv": (lambda T, A: T.svd(A, compute_uv=False), [rng.standard_normal((4, 3))]),
    "eigh": (lambda T, A: _eigh_signs(*T.linalg.eigh(A + A.mT)), [rng.standard_normal((2, 4, 4))]),
    "eigh_U": (lambda T, A: _eigh_signs(*T.linalg.eigh(A + A.mT, UPLO="U")), [rng.standard_normal((3, 3))]),
    "eigvalsh": (lambda T, A: T.linalg.eigvalsh(A + A.mT), [rng.standard_normal((3, 3))]),
    "eigvalsh_identity": (lambda T, A: T.linalg.eigvalsh(A * 0 + T.eye(3, dtype=A.dtype)),
                          [rng.standard_normal((3, 3))]),
    "lstsq": (lambda T, A, B: T.linalg.lstsq(A, B), [rng.standard_normal((5, 3)), rng.standard_normal((5, 2))]),
    "lstsq_gelsd": (lambda T, A, B: T.linalg.lstsq(A, B, driver="gelsd"),
                    [rng.standard_normal((2, 5, 3)), rng.standard_normal((2, 5, 2))]),
    "lstsq_gels_vec": (lambda T, A, b: T.linalg.lstsq(A, b, driver="gels"),
                       [rng.standard_normal((4, 3)), rng.standard_normal(4)]),
    "pinv": (lambda T, A: T.linalg.pinv(A), [rng.standard_normal((2, 3, 5))]),
    "pinv_rank_deficient": (lambda T, A: T.linalg.pinv(A[..., :1] @ A[..., :1, :].mT.mT),
                            [rng.standard_normal((3, 3))]),
    "pinverse": (lambda T, A: T.pinverse(A), [rng.standard_normal((4, 3))]),
    "pinv_hermitian": (lambda T, A: T.linalg.pinv(A + A.mT, hermitian=True), [rng.standard_normal((3, 3))]),
    "lu_factor": (lambda T, A: T.linalg.lu_factor(A), [rng.standard_normal((2, 4, 4))]),
    "lu_factor_ex": (lambda T, A: T.linalg.lu_factor_ex(A), [rng.standard_normal((3, 3))]),
    "lu": (lambda T, A: T.linalg.lu(A), [rng.standard_normal((2, 3, 3))]),
    "lu_rect": (lambda T, A: T.linalg.lu(A.detach()), [rng.standard_normal((3, 5))]),
    "lu_solve": (lambda T, A, B: T.linalg.lu_solve(*T.linalg.lu_factor(A), B),
                 [rng.standard_normal((3, 3)), rng.standard_normal((2, 3, 2))]),
    "lu_solve_adjoint": (lambda T, A, B: T.linalg.lu_solve(*T.linalg.lu_factor(A), B, adjoint=True),
                         [rng.standard_normal((2, 3, 3)), rng.standard_normal((2, 3, 2))]),
    "torch_lu_solve": (lambda T, A, B: T.lu_solve(B, *T.linalg.lu_factor(A)),
                       [rng.standard_normal((3, 3)), rng.standard_normal((3, 2))]),
    "lu_unpack": (lambda T, A: T.lu_unpack(*T.linalg.lu_factor(A)), [rng.standard_normal((4, 4))]),
    "matrix_exp": (lambda T, A: T.linalg.matrix_exp(A), [rng.standard_normal((2, 3, 3))]),
    "matrix_exp_big": (lambda T, A: T.matrix_exp(A * 4), [rng.standard_normal((3, 3))]),
    "matrix_rank": (lambda T, A: T.linalg.matrix_rank(A[..., :2] @ A[..., :2, :]), [rng.standard_normal((2, 4, 4))]),
    "matrix_rank_atol": (lambda T, A: T.linalg.matrix_rank(A, atol=1.0, rtol=0.0), [rng.standard_normal((4, 4))]),
    "cond": (lambda T, A: T.linalg.cond(A), [rng.standard_normal((2, 3, 3))]),
    "cond_p": (lambda T, A: (A := A.detach(), T.linalg.cond(A, "fro"), T.linalg.cond(A, 1), T.linalg.cond(A, -2),
                             T.linalg.cond(A, float("inf")), T.linalg.cond(A, "nuc")), [_sq(3, 3)]),
    "inv_ex": (lambda T, A: T.linalg.inv_ex(A), [_sq(2, 3, 3)]),
    "diagonal": (lambda T, A: T.linalg.diagonal(A, offset=1), [rng.standard_normal((2, 3, 4))]),
    "matmul": (lambda T, A, B: T.linalg.matmul(A, B), [rng.standard_normal((2, 3)), rng.standard_normal(3)]),
    "vander": (lambda T, x: T.linalg.vander(x), [rng.standard_normal((2, 3))]),
    "vander_N": (lambda T, x: T.linalg.vander(x, N=5), [rng.standard_normal(3)]),
    "tensorinv": (lambda T, A: T.linalg.tensorinv(A.reshape(4, 6, 8, 3), ind=2), [_sq(24, 24)]),
    "tensorsolve": (lambda T, A, B: T.linalg.tensorsolve(A.reshape(2, 3, 6), B),
                    [_sq(6, 6), rng.standard_normal((2, 3))]),
    "tensorsolve_dims": (lambda T, A, B: T.linalg.tensorsolve(A.reshape(6, 2, 3), B, dims=(0,)),
                         [_sq(6, 6), rng.standard_normal((2, 3))]),
    "householder_product": (lambda T, A, tau: T.linalg.householder_product(A, tau),
                            [rng.standard_normal((2, 4, 3)), rng.standard_normal((2, 3))]),
    "orgqr": (lambda T, A, tau: T.orgqr(A, tau), [rng.standard_normal((3, 3)), rng.standard_normal(2)]),
    "cholesky_solve": (lambda T, B, L: T.cholesky_solve(B, L.tril() + 3 * T.eye(3, dtype=L.dtype)),
                       [rng.standard_normal((2, 3, 2)), rng.standard_normal((3, 3))]),
    "cholesky_inverse": (lambda T, L: T.cholesky_inverse(L.tril() + 3 * T.eye(3, dtype=L.dtype)),
                         [rng.standard_normal((3, 3))]),
    "triangular_solve": (lambda T, B, A: T.triangular_solve(B, A, upper=False, unitriangular=True),
                         [rng.standard_normal((3, 2)), rng.standard_normal((3, 3))]),
    "torch_lu": (lambda T, A: T.lu(A, get_infos=True), [rng.standard_normal((3, 3))]),
}


@needs_torch
@pytest.mark.torch
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name", sorted(TORCH_PROGRAMS))
def test_matches_torch(name, dtype):
    fn, arrays = TORCH_PROGRAMS[name]
    tol = dict(rtol=1e-8, atol=1e-10) if dtype == "float64" else dict(rtol=2e-4, atol=2e-5)
    lx, tx = _lib_inputs(llgrad, arrays, dtype), _lib_inputs(torch, arrays, dtype)
    lo, to = fn(llgrad, *lx), fn(torch, *tx)
    if isinstance(to, tuple) and hasattr(to, "_fields"):
        assert type(lo).__name__ == type(to).__name__ and lo._fields == to._fields
    lf, tf = _flat(lo), _flat(to)
    assert len(lf) == len(tf)
    for a, b in zip(lf, tf):
        assert tuple(a.shape) == tuple(b.shape), (name, tuple(a.shape), tuple(b.shape))
        assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), **tol)
    pairs = [(a, b) for a, b in zip(lf, tf) if b.requires_grad]
    assert [a.requires_grad for a, _ in pairs] == [True] * len(pairs)
    if not pairs:
        return
    w = np.random.default_rng(1)
    seeds = [w.standard_normal(tuple(b.shape)).astype(dtype) for _, b in pairs]
    lg = llgrad.autograd.grad([a for a, _ in pairs], lx, [llgrad.tensor(s) for s in seeds],
                              allow_unused=True)
    tg = torch.autograd.grad([b for _, b in pairs], tx, [torch.tensor(s) for s in seeds],
                             allow_unused=True)
    for a, b in zip(lg, tg):
        a = 0 if a is None else a.numpy()
        b = 0 if b is None else b.numpy()
        np.testing.assert_allclose(a, b, rtol=tol["rtol"] * 100, atol=tol["atol"] * 100)


ERRORS = {
    "solve_singular": (lambda T: T.linalg.solve(T.zeros(3, 3, dtype=T.float64),
                                                T.ones(3, dtype=T.float64))),
    "solve_singular_batch": (lambda T: T.linalg.solve(T.zeros(2, 3, 3), T.ones(3))),
    "solve_shapes": (lambda T: T.linalg.solve(T.eye(3), T.ones(4))),
    "solve_dtype": (lambda T: T.linalg.solve(T.eye(3, dtype=T.float64), T.ones(3))),
    "solve_int": (lambda T: T.linalg.solve(T.eye(3, dtype=T.int64), T.ones(3))),
    "solve_nonsquare": (lambda T: T.linalg.solve(T.ones(2, 3), T.ones(2))),
    "cholesky_not_pd": (lambda T: T.linalg.cholesky(-T.eye(3))),
    "cholesky_not_pd_batch": (lambda T: T.linalg.cholesky(T.eye(3) - 2 * T.eye(3)[[2]].mT @ T.eye(3)[[2]]
                                                          + T.zeros(2, 1, 1))),
    "cholesky_ex_check": (lambda T: T.linalg.cholesky_ex(-T.eye(2), check_errors=True)),
    "qr_1d": (lambda T: T.linalg.qr(T.ones(3))),
    "qr_mode": (lambda T: T.linalg.qr(T.eye(3), mode="x")),
    "svd_1d": (lambda T: T.linalg.svd(T.ones(3))),
    "svd_nan": (lambda T: T.linalg.svd(T.full((3, 3), float("nan")))),
    "eigh_nonsquare": (lambda T: T.linalg.eigh(T.ones(2, 3))),
    "eigh_uplo": (lambda T: T.linalg.eigh(T.eye(3), UPLO="X")),
    "lu_factor_singular": (lambda T: T.linalg.lu_factor(T.zeros(3, 3))),
    "solve_triangular_1d": (lambda T: T.linalg.solve_triangular(T.eye(3), T.ones(3), upper=True)),
    "matrix_exp_nonsquare": (lambda T: T.linalg.matrix_exp(T.ones(2, 3))),
    "lstsq_driver": (lambda T: T.linalg.lstsq(T.ones(3, 2), T.ones(3, 1), driver="x")),
    "qr_backward_r": (lambda T: T.linalg.qr(T.ones(3, 2, requires_grad=True), mode="r")[1].sum().backward()),
    "qr_backward_complete": (lambda T: T.linalg.qr(T.eye(3, 2).requires_grad_(), mode="complete")[0].sum().backward()),
    "vander_N": (lambda T: T.linalg.vander(T.ones(3), N=1)),
    "solve_vector_right": (lambda T: T.linalg.solve(T.eye(3).expand(2, 3, 3), T.ones(2, 3),
                                                    left=False)),
}


@needs_torch
@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(ERRORS))
def test_errors_match_torch(name):
    with pytest.raises(Exception) as te:
        ERRORS[name](torch)
    with pytest.raises(Exception) as le:
        ERRORS[name](llgrad)
    assert type(le.value).__name__ == type(te.value).__name__
    assert str(le.value).split("\n")[0] == str(te.value).split("\n")[0]


@needs_torch
@pytest.mark.torch
def test_ex_variants_report_info_like_torch():
    for fn in (lambda T: T.linalg.solve_ex(T.zeros(2, 3, 3), T.ones(3)).info,
               lambda T: T.linalg.cholesky_ex(T.eye(3) - 2 * T.eye(3)[[1]].mT @ T.eye(3)[[1]]).info,
               lambda T: T.linalg.lu_factor_ex(T.zeros(3, 3)).info,
               lambda T: T.linalg.inv_ex(T.zeros(2, 2)).info,
               lambda T: T.linalg.lu_factor_ex(T.zeros(3, 3)).pivots):
        np.testing.assert_array_equal(fn(llgrad).numpy(), fn(torch).numpy())
