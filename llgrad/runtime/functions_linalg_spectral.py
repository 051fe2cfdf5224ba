"""torch.linalg's decompositions and what PyTorch composes from them, with PyTorch's signatures,
checks, messages and named-tuple results: linalg.qr, svd, svdvals, eigh, eigvalsh, eig,
eigvals, lstsq, pinv, matrix_rank, cond; and the top-level torch.qr, svd, pinverse. Ops of
llgrad/ir/ops_linalg_spectral.py; pinv, lstsq, matrix_rank and cond are PyTorch's own
compositions (differentiable through the SVD / eigh)."""
import numpy as np

from ..ir import OPS
from . import dispatch
from .dispatch import call
from .functions import export, where
from .functions_linalg_solve import _out, check_matrix, inv_ex, same_dtype
from .functions_matrix import LinAlgError, check_square
from .return_types import named_result
from .linalg import matrix_norm
from .node import grad_enabled
from .tensor import Tensor
from .autocast_cast import float32_list

_QR = named_result("linalg_qr", ["Q", "R"])
_QR_LEGACY = named_result("qr", ["Q", "R"])
_SVD = named_result("linalg_svd", ["U", "S", "Vh"])
_SVD_LEGACY = named_result("svd", ["U", "S", "V"])
_EIGH = named_result("linalg_eigh", ["eigenvalues", "eigenvectors"])
_EIG = named_result("linalg_eig", ["eigenvalues", "eigenvectors"])
_LSTSQ = named_result("linalg_lstsq", ["solution", "residuals", "rank", "singular_values"])


@float32_list
def qr(A, mode="reduced", *, out=None):
    """As torch.linalg.qr: (Q, R) with A = QR; mode 'reduced', 'complete' or 'r' (Q empty)."""
    check_matrix("linalg.qr", A, square=False)
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of "
                           "'reduced' (default), 'r', or 'complete'")
    return _out(_QR(*call(OPS["linalg_qr"], (A,), {"mode": mode})), out)


def legacy_qr(input, some=True, *, out=None):
    """As torch.qr (deprecated in PyTorch): linalg.qr, mode 'reduced' (some) or 'complete'."""
    return _out(_QR_LEGACY(*qr(input, "reduced" if some else "complete")), out)


def _svd(A, full_matrices, compute_uv, name):
    check_matrix(name, A, square=False)
    try:
        return call(OPS["linalg_svd"], (A,), {"full_matrices": bool(full_matrices),
                                               "compute_uv": bool(compute_uv)})
    except (np.linalg.LinAlgError, RuntimeError) as e:     # (LAPACK's, as the dispatcher
        if "converge" not in str(e):                        # passes it on)
            raise
        raise LinAlgError(f"{name}: The algorithm failed to converge because the input matrix "
                          "contained non-finite values.") from None


@float32_list
def svd(A, full_matrices=True, *, driver=None, out=None):
    """As torch.linalg.svd: (U, S, Vh), S descending, A = U diag(S) Vh."""
    return _out(_SVD(*_svd(A, full_matrices, True, "linalg.svd")), out)


@float32_list
def svdvals(A, *, driver=None, out=None):
    """As torch.linalg.svdvals: the singular values, descending (its gradient U diag(g) Vh)."""
    return _out(_svd(A, False, False, "linalg.svdvals")[1], out)


@float32_list
def legacy_svd(input, some=True, compute_uv=True, *, out=None):
    """As torch.svd (deprecated in PyTorch): (U, S, V) with V = Vh^T; compute_uv=False gives
    zero U (m x m) and V (n x n)."""
    if not compute_uv:
        s = svdvals(input)
        m, n = input.shape[-2:]
        lead = tuple(input.shape[:-2])
        return _out(_SVD_LEGACY(input.new_zeros(lead + (m, m)), s,
                                input.new_zeros(lead + (n, n))), out)
    u, s, vh = _svd(input, not some, True, "linalg.svd")
    return _out(_SVD_LEGACY(u, s, vh.mT), out)


def _uplo(UPLO):
    if not isinstance(UPLO, str) or len(UPLO) != 1 or UPLO.upper() not in ("L", "U"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")
    return UPLO.upper()


def _eigh(A, UPLO, compute_v, name):
    check_matrix(name, A)
    try:
        return call(OPS["linalg_eigh"], (A,), {"UPLO": _uplo(UPLO), "compute_v": compute_v})
    except (np.linalg.LinAlgError, RuntimeError) as e:
        if "converge" not in str(e):
            raise
        raise LinAlgError(f"{name}: The algorithm failed to converge because the input matrix "
                          "is ill-conditioned or has too many repeated eigenvalues") from None


@float32_list
def eigh(input, UPLO="L", *, out=None):
    """As torch.linalg.eigh: (eigenvalues ascending, eigenvectors) of a symmetric matrix (only
    the UPLO triangle is read)."""
    return _out(_EIGH(*_eigh(input, UPLO, True, "linalg.eigh")), out)


@float32_list
def eigvalsh(input, UPLO="L", *, out=None):
    """As torch.linalg.eigvalsh: the eigenvalues of a symmetric matrix, ascending."""
    return _out(_eigh(input, UPLO, False, "linalg.eigvalsh")[0], out)


def _eig(A, name):
    """linalg_eig of A after PyTorch's checks (complex A too, unlike check_matrix's)."""
    check_square(name, A, "linalg_eig")
    if not (A._dtype.is_floating_point or A._dtype.is_complex):
        raise RuntimeError(f"Unknown Complex ScalarType for {A._dtype._tensor_type[:-6]}")
    if A._dtype.itemsize == 2:          # (LAPACK has no half-precision eig)
        raise NotImplementedError(f'"linalg_eig_out_cpu" not implemented for '
                                  f"'{A._dtype._tensor_type[:-6]}'")
    return call(OPS["linalg_eig"], (A,), {})


@float32_list
def eig(input, *, out=None):
    """As torch.linalg.eig: (eigenvalues, eigenvectors) of a square matrix, complex (of a
    real A too), in LAPACK's order, each eigenvector of unit norm with its largest component
    real; its gradient is PyTorch's, and a loss that depends on the eigenvectors' phases
    (which are arbitrary) is refused in backward."""
    return _out(_EIG(*_eig(input, "linalg.eig")), out)


@float32_list
def eigvals(input, *, out=None):
    """As torch.linalg.eigvals: the eigenvalues of a square matrix, complex, in eig's order
    (its node is linalg.eig's, as in PyTorch)."""
    return _out(_eig(input, "linalg.eigvals")[0], out)


# ---- PyTorch's compositions ------------------------------------------------------------------------

def _tolerances(A, atol, rtol, s_max, name):
    """max(atol, rtol * s_max) as PyTorch's pinv / matrix_rank choose them."""
    m, n = A.shape[-2:]
    eps = float(np.finfo(np.float32 if A.dtype.name == "float32" else np.float64).eps)
    if rtol is None:
        rtol = eps * max(m, n) if atol is None or (not isinstance(atol, Tensor) and atol <= 0) \
            else 0.0
    atol = 0.0 if atol is None else atol
    # (tensor tolerances are per matrix, of A's batch shape, as PyTorch unsqueezes them)
    rtol, atol = (t.unsqueeze(-1) if isinstance(t, Tensor) else t for t in (rtol, atol))
    tol = s_max * rtol
    if isinstance(atol, Tensor):
        return where(atol > tol, atol, tol)
    return tol.clamp(min=float(atol)) if atol else tol


@float32_list
def pinv(input, rcond=None, hermitian=False, *, atol=None, rtol=None, out=None):
    """As torch.linalg.pinv: the pseudo-inverse, from the SVD (hermitian: from eigh), the
    singular values at most max(atol, rtol * largest) dropped (rcond: rtol, as PyTorch's old
    signature)."""
    if isinstance(input, Tensor) and not input._data.size:
        hermitian = False           # (PyTorch's empty A: from the SVD, any shape)
    check_matrix("linalg.pinv", input, square=hermitian)
    if rcond is not None:
        rtol = rcond
    if hermitian:
        lam, q = _eigh(input, "L", True, "linalg.pinv")
        s_abs = lam.abs()
        tol = _tolerances(input, atol, rtol, s_abs.amax(-1, keepdim=True), "linalg.pinv")
        inv = where(s_abs > tol, lam.reciprocal(), 0.0)
        p = (q * inv.unsqueeze(-2)).matmul(q.mT)
        # (a dual tensor of forward AD too: its tangent need not be symmetric)
        full = input.requires_grad and grad_enabled() or \
            dispatch.forward_ad is not None and dispatch.forward_ad.get(input) is not None
        return _out(_pinv_derivative(input, p) if full else p, out)
    u, s, vh = _svd(input, False, True, "linalg.pinv")
    s_max = s[..., :1] if s.shape[-1] else s.new_zeros(tuple(s.shape[:-1]) + (1,))
    tol = _tolerances(input, atol, rtol, s_max, "linalg.pinv")
    inv = where(s > tol, s.reciprocal(), 0.0)
    p = (vh.mT * inv.unsqueeze(-2)).matmul(u.mT)
    # (the SVD's derivative is not p's where singular values repeat, nan at second order:
    # PyTorch's pinv_backward, whose first pass needs no derivative of p)
    full = input.requires_grad and grad_enabled() or \
        dispatch.forward_ad is not None and dispatch.forward_ad.get(input) is not None
    return _out(_pinv_derivative(input, p.detach()) if full else p, out)


def _pinv_derivative(A, p):
    """p, A's pseudo-inverse, with PyTorch's derivative (pinv_backward's, for any change E of
    A; eigh's covers symmetric ones only): p plus the JVP J(P, A)[E] = -P E P + P P^T E^T
    (I - A P) + (I - P A) E^T P^T P at the zero-valued E = A - A.detach(), whose VJP is its
    adjoint. Its coefficients are taken halfway along E (second derivatives: 1/2 + 1/2, not
    2), from a first pass whose derivative is J."""
    e, half = A - A.detach(), (A + A.detach()) / 2
    pd = p.detach()
    p1 = pd + _pinv_jvp(p, A, e)
    return pd + _pinv_jvp(pd + (p1 - pd) / 2, half, e)


def _pinv_jvp(p, A, e):
    pt, et = p.mT, e.mT
    return p.matmul(pt).matmul(et - et.matmul(A).matmul(p)) - p.matmul(e).matmul(p) + \
        (et - p.matmul(A).matmul(et)).matmul(pt.matmul(p))


@float32_list
def pinverse(input, rcond=1e-15):
    """As torch.pinverse: linalg.pinv(input, rtol=rcond)."""
    return pinv(input, rtol=rcond)


@float32_list
def matrix_rank(input, tol=None, hermitian=False, *, atol=None, rtol=None, out=None):
    """As torch.linalg.matrix_rank: how many singular values exceed max(atol, rtol * largest)
    (int64; tol: atol, as PyTorch's old signature)."""
    check_matrix("linalg.matrix_rank", input, square=hermitian)
    if tol is not None:
        atol, rtol = tol, 0.0 if rtol is None else rtol
    with_grad = input.detach()
    s = (_eigh(with_grad, "L", False, "linalg.matrix_rank")[0].abs() if hermitian
         else _svd(with_grad, False, False, "linalg.matrix_rank")[1])
    s_max = s.amax(-1, keepdim=True) if s.shape[-1] else s.new_zeros(tuple(s.shape[:-1]) + (1,))
    tol_ = _tolerances(input, atol, rtol, s_max, "linalg.matrix_rank")
    return _out((s > tol_).sum(-1), out)


@float32_list
def cond(input, p=None, *, out=None):
    """As torch.linalg.cond: p None / 2 / -2 from the singular values; 'fro', 'nuc', inf, -inf,
    1, -1 as norm(A, p) * norm(A^-1, p) (inf for a singular matrix, as PyTorch)."""
    name = "linalg.cond"
    if p in (None, 2, -2):
        check_matrix(name, input, square=False)
        if input.numel() == 0:                          # as PyTorch: zeros of the batch shape
            return _out(input.new_zeros(input.shape[:-2]), out)
        s = svdvals(input)
        r = s[..., 0] / s[..., -1] if p != -2 else s[..., -1] / s[..., 0]
        return _out(r, out)
    if p not in ("fro", "nuc", float("inf"), float("-inf"), 1, -1):
        raise RuntimeError(f"linalg.cond got an invalid norm type: {p}")
    check_matrix(name, input)
    if input.numel() == 0:
        return _out(input.new_zeros(input.shape[:-2]), out)
    inv, info = inv_ex(input)
    r = matrix_norm(input, p) * matrix_norm(inv, p)
    return _out(where(info > 0, float("inf"), r), out)


_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


@float32_list
def lstsq(input, b, rcond=None, *, driver=None):
    """As torch.linalg.lstsq: the least-squares (minimum norm) solution of AX = B with
    PyTorch's CPU outputs per driver: residuals (the squared residual norms, when m > n, A has
    full rank and the driver is not gelsy), rank (not gels), singular_values (gelsd, gelss).
    The solution is pinv(A) B (rcond: the relative tolerance, default eps * max(m, n))."""
    name = "torch.linalg.lstsq"
    check_matrix(name, input, square=False)
    if not isinstance(b, Tensor):
        raise TypeError(f"lstsq(): argument 'B' (position 2) must be Tensor, not "
                        f"{type(b).__name__}")
    same_dtype(name, input, b)
    driver = "gelsy" if driver is None else driver
    if driver not in _DRIVERS:
        raise RuntimeError(f"{name}: parameter `driver` should be one of (gels, gelsy, gelsd, "
                           "gelss)")
    vector = b.dim() == input.dim() - 1
    b = b.unsqueeze(-1) if vector else b
    m, n = input.shape[-2:]
    if b.dim() < 2 or b.shape[-2] != m:
        raise RuntimeError(f"{name}: input.size(-2) should match other.size(-2)")
    x = pinv(input, rtol=rcond).matmul(b)
    empty = x.reshape(-1)[:0]           # (PyTorch's empty outputs are in the graph too)
    u, s, vh = _svd(input.detach(), False, False, name)
    s_max = s[..., :1] if s.shape[-1] else s.new_zeros(tuple(s.shape[:-1]) + (1,))
    eps = float(np.finfo(np.float32 if input.dtype.name == "float32" else np.float64).eps)
    rank = (s > s_max * (eps * max(m, n) if rcond is None else rcond)).sum(-1)
    residuals = empty
    if driver != "gelsy" and m > n and bool((rank == n).all()):
        residuals = (input.matmul(x) - b).pow(2).sum(-2)
    return _LSTSQ(x.squeeze(-1) if vector else x, residuals,
                  rank if driver != "gels" else rank.new_zeros((0,)),
                  s if driver in ("gelsd", "gelss") else empty)


legacy_qr.__name__ = legacy_qr.__qualname__ = "qr"
legacy_svd.__name__ = legacy_svd.__qualname__ = "svd"
for _f in (legacy_qr, legacy_svd, pinverse):
    export(_f)
    setattr(Tensor, _f.__name__, _f)
