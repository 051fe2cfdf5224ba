"""The LDL^T factorisation of symmetric matrices (torch.linalg.ldl_factor_ex / ldl_solve):

  linalg_ldl_factor_ex (A; hermitian) -> (LD, pivots (int32), info (int32)): LAPACK's sytrf
                       (lower), Bunch-Kaufman pivoting, in LAPACK's compact form and pivots
  linalg_ldl_solve     (LD, pivots, B; hermitian) -> X with A X = B: LAPACK's sytrs (lower)

They follow LAPACK's unblocked sytf2 / sytrs step for step, so LD and pivots are PyTorch's
(its CPU path calls LAPACK), not just another valid factorisation. PyTorch gives neither op
a derivative. Only the lower triangle of A is read; LD's strict upper triangle is zero.
Compiled code calls these implementations back (native_host)."""
import numpy as np

from .optable import defop, no_derivative

_ALPHA = (1.0 + np.sqrt(17.0)) / 8.0     # Bunch-Kaufman's threshold (sytf2)


def _sytf2(a):
    """One matrix, in place (lower triangle): (pivots, info) as LAPACK's sytf2 gives them."""
    n = a.shape[0]
    ipiv = np.zeros(n, dtype=np.int32)
    info, k = 0, 0
    while k < n:
        kstep, absakk = 1, abs(a[k, k])
        imax, colmax = k, 0.0
        if k < n - 1:
            imax = k + 1 + int(np.argmax(np.abs(a[k + 1:, k])))
            colmax = abs(a[imax, k])
        if max(absakk, colmax) == 0 or np.isnan(absakk):
            info = info or k + 1        # a zero column: no step, LAPACK goes on
            kp = k
        else:
            if absakk >= _ALPHA * colmax:
                kp = k
            else:
                rowmax = np.max(np.abs(a[imax, k:imax]))
                if imax < n - 1:
                    rowmax = max(rowmax, np.max(np.abs(a[imax + 1:, imax])))
                if absakk >= _ALPHA * colmax * (colmax / rowmax):
                    kp = k
                elif abs(a[imax, imax]) >= _ALPHA * rowmax:
                    kp = imax
                else:
                    kp, kstep = imax, 2
            kk = k + kstep - 1
            if kp != kk:        # symmetric interchange of rows/columns kk and kp
                if kp < n - 1:
                    a[kp + 1:, [kk, kp]] = a[kp + 1:, [kp, kk]]
                t = a[kk + 1:kp, kk].copy()
                a[kk + 1:kp, kk] = a[kp, kk + 1:kp]
                a[kp, kk + 1:kp] = t
                a[kk, kk], a[kp, kp] = a[kp, kp], a[kk, kk]
                if kstep == 2:
                    a[k + 1, k], a[kp, k] = a[kp, k], a[k + 1, k]
            if kstep == 1:
                if k < n - 1:
                    x = a[k + 1:, k].copy()
                    d11 = 1.0 / a[k, k]
                    a[k + 1:, k + 1:] += np.outer(x, -d11 * x)     # (dsyr's order)
                    a[k + 1:, k] = x * d11
            elif k < n - 2:
                d21 = a[k + 1, k]
                d11 = a[k + 1, k + 1] / d21
                d22 = a[k, k] / d21
                d21 = (1.0 / (d11 * d22 - 1.0)) / d21
                wk = d21 * (d11 * a[k + 2:, k] - a[k + 2:, k + 1])
                wkp1 = d21 * (d22 * a[k + 2:, k + 1] - a[k + 2:, k])
                a[k + 2:, k + 2:] -= np.outer(a[k + 2:, k], wk) + np.outer(a[k + 2:, k + 1], wkp1)
                a[k + 2:, k] = wk
                a[k + 2:, k + 1] = wkp1
        ipiv[k:k + kstep] = kp + 1 if kstep == 1 else -(kp + 1)
        k += kstep
    return ipiv, info


def _ldl_factor(a, hermitian=False):
    ld = np.array(a, dtype=a.dtype, order="C")
    n = ld.shape[-1]
    batch = ld.reshape((int(np.prod(a.shape[:-2])), n, n))  # (a view: -1 fails when empty)
    piv = np.zeros((batch.shape[0], n), dtype=np.int32)
    info = np.zeros(batch.shape[0], dtype=np.int32)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for b in range(batch.shape[0]):
            piv[b], info[b] = _sytf2(batch[b])
    batch[:] = np.tril(batch)
    return ld, piv.reshape(a.shape[:-1]), info.reshape(a.shape[:-2])


def _sytrs(ld, ipiv, b):
    """One system, in place on b (n x k): LAPACK's sytrs for sytf2's lower factorisation."""
    n, k = ld.shape[0], 0
    while k < n:                    # L D Y = P B
        if ipiv[k] > 0 or k == n - 1:
            kp = abs(ipiv[k]) - 1
            b[[k, kp]] = b[[kp, k]]
            b[k + 1:] -= np.outer(ld[k + 1:, k], b[k])
            b[k] *= 1.0 / ld[k, k]
            k += 1
        else:
            kp = -ipiv[k] - 1
            b[[k + 1, kp]] = b[[kp, k + 1]]
            if k < n - 2:
                b[k + 2:] -= np.outer(ld[k + 2:, k], b[k])
                b[k + 2:] -= np.outer(ld[k + 2:, k + 1], b[k + 1])
            akm1k = ld[k + 1, k]
            akm1, ak = ld[k, k] / akm1k, ld[k + 1, k + 1] / akm1k
            denom = akm1 * ak - 1.0
            bkm1, bk = b[k] / akm1k, b[k + 1] / akm1k
            b[k] = (ak * bkm1 - bk) / denom
            b[k + 1] = (akm1 * bk - bkm1) / denom
            k += 2
    k = n - 1
    while k >= 0:                   # L^T P^T X = Y
        if ipiv[k] > 0 or k == 0:
            b[k] -= ld[k + 1:, k] @ b[k + 1:]
            kp = abs(ipiv[k]) - 1
            b[[k, kp]] = b[[kp, k]]
            k -= 1
        else:
            b[k] -= ld[k + 1:, k] @ b[k + 1:]
            b[k - 1] -= ld[k + 1:, k - 1] @ b[k + 1:]
            kp = -ipiv[k] - 1
            b[[k, kp]] = b[[kp, k]]
            k -= 2


def _ldl_solve(ld, piv, b, hermitian=False):
    shape = np.broadcast_shapes(ld.shape[:-2], piv.shape[:-1], b.shape[:-2])
    n = ld.shape[-1]
    x = np.array(np.broadcast_to(b, shape + b.shape[-2:]), dtype=b.dtype, order="C")
    lds = np.broadcast_to(ld, shape + ld.shape[-2:]).reshape((-1, n, n)) if x.size else ()
    pivs = np.broadcast_to(piv, shape + piv.shape[-1:]).reshape((-1, n)) if x.size else ()
    xs = x.reshape((-1,) + x.shape[-2:]) if x.size else ()
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for one, p, rhs in zip(lds, pivs, xs):
            p = p.astype(np.int64)
            # (pivots no factorisation gives, such as type inference's zeros: no interchange)
            p[(p == 0) | (np.abs(p) > n)] = np.flatnonzero((p == 0) | (np.abs(p) > n)) + 1
            _sytrs(one, p, rhs)
    return x


defop("linalg_ldl_factor_ex", _ldl_factor, vjp=no_derivative("linalg_ldl_factor_ex"),
      grad_fn="NotImplemented", nout=3, kind="other", native_host=True)
defop("linalg_ldl_solve", _ldl_solve, args=("LD", "pivots", "B"), nondiff=("pivots",),
      vjp=no_derivative("linalg_ldl_solve"), grad_fn="NotImplemented", kind="other",
      native_host=True)
