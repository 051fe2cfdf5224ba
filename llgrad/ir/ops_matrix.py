"""Square-matrix ops: linalg_inv_ex (torch.inverse, linalg.inv: the inverses and LAPACK's
info, which the runtime checks), linalg_det (torch.det) and linalg_slogdet (torch.slogdet;
torch.logdet is its composition, as in PyTorch), batched over leading dims, by LAPACK through
NumPy. linalg_slogdet has a native lowering (codegen/lowerings/ops_linalg_slogdet.py); compiled
code calls the others' implementations back (native_host, codegen/lowerings/host_call.py).

Backward (PyTorch's formulas for invertible matrices): inv: -A^-T g A^-T (A^-1 the result);
det: g det(A) A^-T; slogdet: g_logabsdet A^-T, by a solve (the sign has no gradient). For
a singular matrix linalg_inv_ex gives the pseudo-inverse (finite), so det's gradient is 0
there (g * det), as PyTorch's is."""
import numpy as np

from .optable import defop


def _first_zero_pivot(a):
    """1-based index of the first exactly zero pivot of LU with partial pivoting (LAPACK
    getrf's info), 0 if none."""
    a = np.array(a, dtype=np.float64)
    n = a.shape[0]
    info = 0
    for k in range(n):
        p = k + int(np.argmax(np.abs(a[k:, k])))
        if a[p, k] == 0:
            info = info or k + 1
            continue
        a[[k, p]] = a[[p, k]]
        a[k + 1:, k] /= a[k, k]
        a[k + 1:, k + 1:] -= np.outer(a[k + 1:, k], a[k, k + 1:])
    return info


def _inv_ex(a):
    """(the inverses, LAPACK's info per matrix: 0, or the 1-based index of the first zero
    pivot of a singular one, whose 'inverse' is then its pseudo-inverse: finite)."""
    info = np.zeros(a.shape[:-2], dtype=np.int32)
    try:
        return np.linalg.inv(a), info
    except np.linalg.LinAlgError:
        pass
    flat_a = a.reshape((-1,) + a.shape[-2:])
    out = np.empty_like(flat_a)
    flat_info = info.reshape(-1)
    for b, m in enumerate(flat_a):
        k = _first_zero_pivot(m)
        flat_info[b] = k
        out[b] = np.linalg.pinv(m) if k else np.linalg.inv(m)
    return out.reshape(a.shape), info


def _mT(t):
    return t.transpose(-2, -1)


def _inv_vjp(c, gs):
    r = _mT(c.result0)
    return (-(r.matmul(gs[0]).matmul(r)),)


# linalg_inv_ex (PyTorch's name): the runtime reads info and raises for a singular matrix
defop("linalg_inv_ex", _inv_ex, vjp=_inv_vjp, grad_fn="LinalgInvExBackward0",
      save=("result0",), nout=2, kind="other", native_host=True)


def _inv_t(a):
    """A^-T as the inverse of A^T: LAPACK gives it C-contiguous, as the traced types say (a
    product with a transposed view would be laid out transposed by NumPy)."""
    return _mT(a)._op("linalg_inv_ex")[0]


def _det(a):
    return np.asarray(np.linalg.det(a), dtype=a.dtype)


def _det_vjp(c, g):
    a = c.self
    scale = (g * c.result).unsqueeze(-1).unsqueeze(-1)
    return (scale * _inv_t(a),)


defop("linalg_det", _det, vjp=_det_vjp, grad_fn="LinalgDetBackward0", save=("self", "result"),
      kind="other", native_host=True)


def _slogdet(a):
    """(sign, log|det|) of a scaled by powers of two, rows then columns, so that each one's
    largest magnitude lies in [0.5, 1): exact, the sign unchanged, log|det| shifted by the
    exponents' sum. LAPACK's LU of entries near float64's range (1e307) over- or underflowed
    unscaled, giving another log|det| and sign than PyTorch's (and the native kernel's)."""
    total = np.zeros(a.shape[:-2])
    if a.shape[-1]:
        with np.errstate(all="ignore"):
            for axis in (-1, -2):
                top = np.max(np.abs(a), axis=axis, keepdims=True)
                exps = np.where(np.isfinite(top) & (top > 0), np.frexp(top)[1], 0)
                a = np.ldexp(a, -exps)
                total = total + np.sum(exps, axis=(-2, -1))
    sign, logabsdet = np.linalg.slogdet(a)
    logabsdet = np.where(np.isfinite(logabsdet), logabsdet + total * np.log(2.0), logabsdet)
    return np.asarray(sign, dtype=a.dtype), np.asarray(logabsdet, dtype=a.dtype)


def _slogdet_vjp(c, gs):
    """g A^-T as PyTorch's: a solve of A^T X = diag(g) (inf/nan for a singular A)."""
    a, g = c.self, gs[1]
    eye_g = g.unsqueeze(-1).expand(*g.shape, a.shape[-1]).diag_embed()
    return (_mT(a)._op("linalg_solve_ex", eye_g, left=True, vector=False)[0],)


defop("linalg_slogdet", _slogdet, vjp=_slogdet_vjp, grad_fn="LinalgSlogdetBackward0",
      save=("self",), nout=2, kind="other", vjp_reads=(1,))
