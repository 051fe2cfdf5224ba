"""The QR, singular value and symmetric eigenvalue decompositions of (batches of) matrices, by
LAPACK through NumPy (the routines PyTorch calls on the CPU, so the signs of the vectors are
the same), batched over leading dims:

  linalg_qr   (A; mode 'reduced' | 'complete' | 'r') -> (Q, R)   (mode 'r': Q is empty)
  linalg_svd  (A; full_matrices, compute_uv) -> (U, S, Vh)    (PyTorch's _linalg_svd: U and
              Vh are computed even when compute_uv is False, for the gradient, as PyTorch does
              when the input requires grad)
  linalg_eigh (A; UPLO, compute_v) -> (eigenvalues ascending, eigenvectors)
  linalg_eig  (A) -> (eigenvalues, eigenvectors), complex (LAPACK's geev: columns of unit
              norm, each with its largest component real); eager only, as every complex op

No native loops: compiled code calls these implementations back (native_host,
codegen/lowerings/host_call.py). The VJP rules are PyTorch's
(linalg_qr_backward, svd_backward, linalg_eig_backward), written with the Tensor API (real
matrices: the adjoint is the transpose)."""
import numpy as np

from .ops_complex import COMPLEX_OF
from .optable import defop


def _mT(t):
    return t.transpose(-2, -1)


# ---- QR -------------------------------------------------------------------------------------------

def _qr(a, mode="reduced"):
    if mode == "r":
        return np.empty((0,), dtype=a.dtype), np.linalg.qr(a, mode="r").astype(a.dtype)
    q, r = np.linalg.qr(a, mode=mode)
    return q.astype(a.dtype), r.astype(a.dtype)


def _right_solve_rt(x, r):
    """x R^-T for upper triangular R."""
    return _mT(r)._op("linalg_solve_triangular", x, upper=False, left=False,
                      unitriangular=False)


def _qr_square_deep(q, r, gq, gr):
    """The gradient of A = QR for m >= n (R square, upper triangular)."""
    qgq = _mT(q).matmul(gq)
    rgr = r.matmul(_mT(gr))
    low = (qgq - _mT(qgq) + rgr - _mT(rgr)).tril()
    return q.matmul(gr + _right_solve_rt(low, r)) + _right_solve_rt(gq - q.matmul(qgq), r)


def _qr_vjp(c, gs):
    if c.mode == "r":
        raise RuntimeError("The derivative of linalg.qr depends on Q, which is not computed when "
                           "mode='r'. Please use linalg.qr(A, mode='reduced') if you are going "
                           "to differentiate through linalg.qr.")
    q, r = c.result0, c.result1
    gq, gr = gs
    m, n = c.shape(0)[-2:]
    if m >= n:
        if c.mode == "complete" and m > n:
            raise RuntimeError("The QR decomposition is not differentiable when "
                               "mode='complete' and nrows > ncols.")
        return (_qr_square_deep(q, r, gq, gr),)
    u, v = r[..., :, :m], r[..., :, m:]
    gu, gv = gr[..., :, :m], gr[..., :, m:]
    y = q.matmul(v)
    gx = _qr_square_deep(q, u, gq + y.matmul(_mT(gv)), gu)
    return (gx._op("cat", q.matmul(gv), dim=len(c.shape(0)) - 1),)


defop("linalg_qr", _qr, vjp=_qr_vjp, grad_fn="LinalgQrBackward0", save=("result0", "result1"),
      nout=2, kind="other", native_host=True)


# ---- SVD ------------------------------------------------------------------------------------------

def _svd(a, full_matrices=True, compute_uv=True):
    u, s, vh = np.linalg.svd(a, full_matrices=full_matrices)
    return u.astype(a.dtype), s.astype(a.dtype), vh.astype(a.dtype)


def _safe(e):
    """E with its zeros (the diagonal; repeated values) made 1: PyTorch puts 1 on the
    diagonal; a repeated value, whose term is 0 / 0 when its vectors get no gradient (svdvals,
    eigvalsh: PyTorch skips the term), gives 0 here (PyTorch: nan when they do)."""
    return e.masked_fill(e == 0, 1)


def _over_s(g, s):
    """g / s, 0 where g is 0: a zero singular value of a non-square A (the zero matrix) made
    0 / 0 of svdvals' and the nuclear norm's gradient, whose U and Vh get none (PyTorch skips
    the term when their gradients are undefined; here they are zeros)."""
    return (g / s).masked_fill(g == 0, 0)


def _svd_vjp(c, gs):
    """PyTorch's svd_backward (U and Vh narrowed to k = min(m, n) columns / rows when
    full_matrices)."""
    u, s, vh = c.result0, c.result1, c.result2
    gu, gsv, gvh = gs
    m, n = c.shape(0)[-2:]
    k = min(m, n)
    if c.full_matrices:
        u, vh, gu, gvh = u[..., :, :k], vh[..., :k, :], gu[..., :, :k], gvh[..., :k, :]
    uhgu = _mT(u).matmul(gu)
    uhgu = uhgu - _mT(uhgu)
    vhgv = vh.matmul(_mT(gvh))
    vhgv = vhgv - _mT(vhgv)
    s2 = s * s
    e = _safe(s2.unsqueeze(-2) - s2.unsqueeze(-1))
    ga = (uhgu * s.unsqueeze(-2) + s.unsqueeze(-1) * vhgv) / e + gsv.diag_embed()
    if m > n:
        ga = u.matmul(ga)
        gusinv = _over_s(gu, s.unsqueeze(-2))
        ga = ga + gusinv - u.matmul(_mT(u).matmul(gusinv))
        return (ga.matmul(vh),)
    if m < n:
        ga = ga.matmul(vh)
        sinvgvh = _over_s(gvh, s.unsqueeze(-1))
        ga = ga + sinvgvh - sinvgvh.matmul(_mT(vh)).matmul(vh)
        return (u.matmul(ga),)
    return (u.matmul(ga.matmul(vh)),)


defop("linalg_svd", _svd, vjp=_svd_vjp, grad_fn="LinalgSvdBackward0",
      save=("result0", "result1", "result2"), nout=3, kind="other", native_host=True)


# ---- symmetric eigenvalue decomposition ----------------------------------------------------------

def _eigh(a, UPLO="L", compute_v=True):
    w, v = np.linalg.eigh(a, UPLO=UPLO)
    return w.astype(a.dtype), v.astype(a.dtype)


def _eigh_vjp(c, gs):
    """PyTorch's linalg_eig_backward for Hermitian A: V (diag(gL) + skew(V^H gV) / E) V^H,
    E[i, j] = L[j] - L[i] (1 on the diagonal)."""
    lam, v = c.result0, c.result1
    gl, gv = gs
    vhgv = _mT(v).matmul(gv)
    vhgv = 0.5 * (vhgv - _mT(vhgv))
    e = _safe(lam.unsqueeze(-2) - lam.unsqueeze(-1))
    ga = vhgv / e + gl.diag_embed()
    return (v.matmul(ga.matmul(_mT(v))),)


defop("linalg_eigh", _eigh, vjp=_eigh_vjp, grad_fn="LinalgEighBackward0",
      save=("result0", "result1"), nout=2, kind="other", native_host=True)


# ---- general eigenvalue decomposition (complex results) ------------------------------------------

def _eig(a):
    if not np.isfinite(a).all():        # (geev may not return on them: PyTorch checks first)
        raise RuntimeError("torch.linalg.eig: input tensor should not contain infs or NaNs.")
    w, v = np.linalg.eig(a)
    out = a.dtype if a.dtype.kind == "c" else COMPLEX_OF[a.dtype]
    return w.astype(out), v.astype(out)


def _solve_complex(m, x):
    """M^-1 X for complex M and X, as the real system [[Mr, -Mi], [Mi, Mr]] [Yr; Yi] =
    [Xr; Xi] (differentiable: real solves, cats and the complex parts' views)."""
    mr, mi = m.real, m.imag
    big = mr._op("cat", -mi, dim=m.dim() - 1)._op(
        "cat", mi._op("cat", mr, dim=m.dim() - 1), dim=m.dim() - 2)
    rhs = x.real._op("cat", x.imag, dim=x.dim() - 2)
    y = big._op("linalg_solve_ex", rhs, left=True, vector=False)[0]
    n = m.shape[-1]
    return y[..., :n, :]._op("complex", y[..., n:, :])


def _eig_vjp(c, gs):
    """PyTorch's linalg_eig_backward (non-Hermitian): V^-H (diag(gL) + (V^H gV - V^H V
    diag(re diag(V^H gV))) / conj(E)) V^H, E[i, j] = L[j] - L[i] off the diagonal; its real
    part for a real A. A loss that depends on the eigenvectors' phases has none."""
    lam, v = c.result0, c.result1
    gl, gv = gs
    vh = v.mH
    vhgv = vh.matmul(gv)
    diag = vhgv.diagonal(0, -2, -1)
    if bool((diag.imag.detach().abs() > 1e-2).any()):     # (PyTorch: allclose(im, 0, 1e-2))
        raise RuntimeError("linalg_eig_backward: The eigenvectors in the complex case are "
                           "specified up to multiplication by e^{i phi}. The specified loss "
                           "function depends on this quantity, so it is ill-defined.")
    vhgv = vhgv - vh.matmul(v * diag.real.unsqueeze(-2))
    lc = lam.conj()
    n = lam.shape[-1]
    off = 1 - lam.real.new_ones(n).diag_embed()           # (0 on the diagonal, 1 off it)
    e = (lc.unsqueeze(-2) - lc.unsqueeze(-1)) * off + (1 - off)
    ga = vhgv / e * off + gl.diag_embed()
    ga = _solve_complex(vh, ga.matmul(vh))
    return (ga if c.dtype(0).is_complex else ga.real,)


defop("linalg_eig", _eig, vjp=_eig_vjp, grad_fn="LinalgEigBackward0",
      save=("result0", "result1"), nout=2, kind="other", complex="only")
