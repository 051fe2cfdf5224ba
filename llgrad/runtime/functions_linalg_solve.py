"""torch.linalg's solves and factorisations with PyTorch's signatures, checks, messages and
named-tuple results: linalg.solve / solve_ex, solve_triangular, cholesky / cholesky_ex,
inv_ex, lu_factor / lu_factor_ex, lu, lu_solve, matrix_exp; and the top-level names PyTorch
keeps (torch.cholesky, cholesky_solve, cholesky_inverse, triangular_solve, lu_unpack,
lu_solve, matrix_exp). Ops of llgrad/ir/ops_linalg_solve.py and ops_matrix.py."""
from ..ir import OPS
from .creation import arange, eye
from .dispatch import call
from .dispatch import scalar_type_name as tname
from .functions import export
from .functions_matrix import LinAlgError
from .return_types import named_result
from .shapes import broadcast_shapes
from .tensor import Tensor
from .out_write import into
from .autocast_cast import float32_list


def check_matrix(name, A, square=True, arg="A"):
    """PyTorch's checks of a linalg input: a Tensor of >= 2 dims of float32/float64 (square
    unless square=False)."""
    if not isinstance(A, Tensor):
        raise TypeError(f"{name.split('.')[-1]}(): argument '{arg}' (position 1) must be "
                        f"Tensor, not {type(A).__name__}")
    if A._data.ndim < 2:
        raise RuntimeError(f"{name}: The input tensor {arg} must have at least 2 dimensions.")
    n, m = A._data.shape[-2:]
    if square and n != m:
        raise RuntimeError(f"{name}: {arg} must be batches of square matrices, but they are {n} "
                           f"by {m} matrices")
    if A._dtype.is_complex:
        raise NotImplementedError(f"llgrad: {name} is not implemented for complex tensors")
    if not A._dtype.is_floating_point:
        raise RuntimeError(f"{name}: Expected a floating point or complex tensor as input. Got "
                           f"{tname(A._dtype)}")
    if A._dtype.name in ("float16", "bfloat16"):
        raise NotImplementedError(f"\"{name}\" not implemented for "
                                  f"'{'Half' if A._dtype.name == 'float16' else 'BFloat16'}'")


def same_dtype(name, A, B):
    if A._dtype is not B._dtype:
        raise RuntimeError(f"{name}: Expected A and B to have the same dtype, but found A of type "
                           f"{tname(A._dtype)} and B of type {tname(B._dtype)} instead")


def raise_for_info(info, batched, message, cls=LinAlgError):
    """Raise cls(message(where, k)) for the first matrix whose info k is not 0 (a value read:
    a guard inside llgrad.compile)."""
    if info._data.size and not info.is_meta and bool((info != 0).any()):
        flat = info.reshape(-1).tolist()
        b = next(i for i, k in enumerate(flat) if k)
        where = f"(Batch element {b}): " if batched else ""
        raise cls(message(where, flat[b]))


def _out(r, out):
    return into(out, r)


# ---- solve ---------------------------------------------------------------------------------------

_SOLVE_EX = named_result("linalg_solve_ex", ["result", "info"])


def _solve_ex(A, B, left, name):
    check_matrix(name, A)
    if not isinstance(B, Tensor):
        raise TypeError(f"solve(): argument 'B' (position 2) must be Tensor, not "
                        f"{type(B).__name__}")
    same_dtype(name, A, B)
    ash, bsh = tuple(A._data.shape), tuple(B._data.shape)
    vector = B._data.ndim == 1 or (B._data.ndim == A._data.ndim - 1 and bsh == ash[:-1])
    n = ash[-1]
    # (PyTorch reads a vector as a column, for XA = B too, where it then fits only n = 1)
    k = (bsh[-1] if left else 1) if vector else bsh[-2] if left else bsh[-1]
    if k != n or B._data.ndim == 0:
        b2 = (bsh[-1], 1) if vector else bsh[-2:]
        raise RuntimeError(f"{name}: Incompatible shapes of A and B for the equation "
                           f"{'AX = B' if left else 'XA = B'} ({n}x{n} and {b2[0]}x{b2[1]})")
    return call(OPS["linalg_solve_ex"], (A, B), {"left": bool(left), "vector": vector})


def solve_ex(A, B, *, left=True, check_errors=False, out=None):
    """As torch.linalg.solve_ex: (result, info), info 0 or the first zero pivot of getrf."""
    x, info = _solve_ex(A, B, left, "linalg.solve_ex")
    if check_errors:
        _raise_singular(info, A, "torch.linalg.solve_ex")
    return _out(_SOLVE_EX(x, info), out)


def _raise_singular(info, A, name):
    raise_for_info(info, A._data.ndim > 2, lambda w, k: f"{name}: {w}The solver failed because "
                   "the input matrix is singular.")


@float32_list
def solve(A, B, *, left=True, out=None):
    """As torch.linalg.solve: X with AX = B (left) or XA = B; B a vector or batch of vectors
    where PyTorch reads it so; batch dims broadcast; a singular A raises LinAlgError."""
    x, info = _solve_ex(A, B, left, "linalg.solve")
    _raise_singular(info, A, "torch.linalg.solve")
    return _out(x, out)


def solve_triangular(input, B, *, upper, left=True, unitriangular=False, out=None):
    """As torch.linalg.solve_triangular: X with AX = B (left) or XA = B for triangular A (the
    other triangle is not read); a zero on the diagonal gives inf/nan, as LAPACK."""
    name = "linalg.solve_triangular"
    check_matrix(name, input)
    check_matrix(name, B, square=False, arg="B")
    same_dtype(name, input, B)
    n, (bm, bn) = input._data.shape[-1], B._data.shape[-2:]
    if (bm if left else bn) != n:
        raise RuntimeError(f"{name}: Incompatible shapes of A and B for the equation "
                           f"{'AX = B' if left else 'XA = B'} ({n}x{n} and {bm}x{bn})")
    r = call(OPS["linalg_solve_triangular"], (input, B), {"upper": bool(upper), "left": bool(left),
                                                      "unitriangular": bool(unitriangular)})
    return _out(r, out)


_TRIANGULAR = named_result("triangular_solve", ["solution", "cloned_coefficient"])


@float32_list
def triangular_solve(input, A, upper=True, transpose=False, unitriangular=False, *, out=None):
    """As torch.triangular_solve (deprecated in PyTorch, kept): (solution of A X = input or
    A^T X = input, a clone of A)."""
    M = A.mT if transpose else A
    x = solve_triangular(M, input, upper=bool(upper) != bool(transpose),
                         unitriangular=unitriangular)
    return _out(_TRIANGULAR(x, A.clone()), out)


# ---- inverse ----------------------------------------------------------------------------------------

_INV_EX = named_result("linalg_inv_ex", ["inverse", "info"])


@float32_list
def inv_ex(A, *, check_errors=False, out=None):
    """As torch.linalg.inv_ex: (inverse, info)."""
    check_matrix("linalg.inv_ex", A)
    r, info = call(OPS["linalg_inv_ex"], (A,), {})
    if check_errors:
        raise_for_info(info, A._data.ndim > 2, lambda w, k: f"linalg.inv_ex: {w}The diagonal "
                       f"element {k} is zero, the inversion could not be completed because the "
                       "input matrix is singular.")
    return _out(_INV_EX(r, info), out)


# ---- Cholesky -----------------------------------------------------------------------------------

_CHOLESKY_EX = named_result("linalg_cholesky_ex", ["L", "info"])


def _raise_not_pd(info, A, name):
    raise_for_info(info, A._data.ndim > 2, lambda w, k: f"{name}: {w}The factorization could "
                   "not be completed because the input is not positive-definite (the leading "
                   f"minor of order {k} is not positive-definite).")


@float32_list
def cholesky_ex(input, *, upper=False, check_errors=False, out=None):
    """As torch.linalg.cholesky_ex: (L, info), info the order of the first leading minor that
    is not positive-definite."""
    check_matrix("linalg.cholesky_ex", input)
    r, info = call(OPS["linalg_cholesky_ex"], (input,), {"upper": bool(upper)})
    if check_errors:
        _raise_not_pd(info, input, "linalg.cholesky_ex")
    return _out(_CHOLESKY_EX(r, info), out)


@float32_list
def linalg_cholesky(input, *, upper=False, out=None):
    """As torch.linalg.cholesky: L lower triangular with A = L L^T (upper: U with A = U^T U);
    only the lower triangle of A is read; not positive-definite raises LinAlgError."""
    check_matrix("linalg.cholesky", input)
    r, info = call(OPS["linalg_cholesky_ex"], (input,), {"upper": bool(upper)})
    _raise_not_pd(info, input, "linalg.cholesky")
    return _out(r, out)


@float32_list
def cholesky(input, upper=False, *, out=None):
    """As torch.cholesky (deprecated in PyTorch): linalg.cholesky."""
    return linalg_cholesky(input, upper=upper, out=out)


@float32_list
def cholesky_solve(input, input2, upper=False, *, out=None):
    """As torch.cholesky_solve: X with (L L^T) X = B given the Cholesky factor L (upper: U^T U)."""
    check_matrix("linalg.cholesky_solve", input2)
    check_matrix("linalg.cholesky_solve", input, square=False, arg="B")
    if input._dtype is not input2._dtype:
        raise RuntimeError(f"Expected b and A to have the same dtype, but found b of type "
                           f"{tname(input._dtype)} and A of type {tname(input2._dtype)} instead.")
    n, (bm, bn) = input2._data.shape[-1], input._data.shape[-2:]
    if bm != n:
        raise RuntimeError(f"Incompatible matrix sizes for cholesky_solve: each A matrix is {n} "
                           f"by {n} but each b matrix is {bm} by {bn}")
    broadcast_shapes(tuple(input._data.shape[:-2]), tuple(input2._data.shape[:-2]))
    # (one op: its gradient for L is PyTorch's full matrix, not the triangle's)
    return _out(call(OPS["cholesky_solve"], (input, input2), {"upper": bool(upper)}), out)


@float32_list
def cholesky_inverse(input, upper=False, *, out=None):
    """As torch.cholesky_inverse: (L L^T)^-1 from the Cholesky factor L (upper: U^T U)."""
    check_matrix("cholesky_inverse", input)
    return _out(cholesky_solve(_eye(input, input.shape[-1], input.shape[-1]).expand(input.shape), input, upper), out)


# ---- LU ----------------------------------------------------------------------------------------------

_LU_FACTOR = named_result("linalg_lu_factor", ["LU", "pivots"])
_LU_FACTOR_EX = named_result("linalg_lu_factor_ex", ["LU", "pivots", "info"])
_LU = named_result("linalg_lu", ["P", "L", "U"])
_LU_UNPACK = named_result("lu_unpack", ["P", "L", "U"])


def _lu_factor(A, pivot, name):
    check_matrix(name, A, square=False)
    if not pivot:
        raise RuntimeError(f"{name}: LU without pivoting is not implemented on the CPU")
    return call(OPS["linalg_lu_factor_ex"], (A,), {"pivot": True})


def lu_factor_ex(A, *, pivot=True, check_errors=False, out=None):
    """As torch.linalg.lu_factor_ex: (LU, pivots (int32, 1-based), info)."""
    lu, piv, info = _lu_factor(A, pivot, "torch.linalg.lu_factor_ex")
    if check_errors:
        raise_for_info(info, A._data.ndim > 2, lambda w, k: f"torch.linalg.lu_factor_ex: {w}"
                       f"U[{k},{k}] is zero and using it on lu_solve would result in a division "
                       "by zero.")
    return _out(_LU_FACTOR_EX(lu, piv, info), out)


def lu_factor(A, *, pivot=True, out=None):
    """As torch.linalg.lu_factor: (LU, pivots); a zero pivot raises, as PyTorch."""
    lu, piv, info = _lu_factor(A, pivot, "torch.linalg.lu_factor")
    raise_for_info(info, A._data.ndim > 2, cls=RuntimeError, message=lambda w, k: f"torch.linalg.lu_factor: {w}U[{k},{k}] "
                   "is zero and using it on lu_solve would result in a division by zero. If you "
                   "still want to perform the factorization, consider calling linalg.lu(A, "
                   "pivot) or linalg.lu_factor_ex(A, pivot)")
    return _out(_LU_FACTOR(lu, piv), out)


def _perm(pivots, m):
    return call(OPS["lu_pivots_to_permutation"], (pivots,), {"m": int(m)})


def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True, *, out=None):
    """As torch.lu_unpack: (P, L, U) with A = P L U."""
    m, n = LU_data.shape[-2:]
    k = min(m, n)
    L = U = P = None
    if unpack_data:
        L = LU_data[..., :, :k].tril(-1) + _eye(LU_data, m, k)
        U = LU_data[..., :k, :].triu()
    if unpack_pivots:
        perm = _perm(LU_pivots, m)
        P = (perm.unsqueeze(-1) == arange(m)).to(LU_data.dtype)
    empty = LU_data.new_zeros((0,))
    return _out(_LU_UNPACK(empty if P is None else P, empty if L is None else L,
                           empty if U is None else U), out)


def _eye(t, m, k):
    return eye(m, k, dtype=t.dtype)


def lu(A, *, pivot=True, out=None):
    """As torch.linalg.lu: (P, L, U) with A = P L U."""
    lu_, piv, _ = _lu_factor(A, pivot, "linalg.lu")
    return _out(_LU(*lu_unpack(lu_, piv)), out)


def linalg_lu_solve(LU, pivots, B, *, left=True, adjoint=False, out=None):
    """As torch.linalg.lu_solve: X with A X = B (adjoint: A^T X = B; left=False: X A = B) from
    lu_factor's (LU, pivots)."""
    name = "linalg.lu_solve"
    check_matrix(name, LU, arg="LU")
    check_matrix(name, B, square=False, arg="B")
    n = LU.shape[-1]
    if not left:        # X A = B <=> A^T X^T = B^T
        return _out(linalg_lu_solve(LU, pivots, B.mT, adjoint=not adjoint).mT, out)
    if B.shape[-2] != n:
        raise RuntimeError(f"{name}: Incompatible shapes of A and B for the equation AX = B "
                           f"({n}x{n} and {B.shape[-2]}x{B.shape[-1]})")
    batch = tuple(broadcast_shapes(tuple(LU.shape[:-2]), tuple(B.shape[:-2])))
    B = B.expand(batch + tuple(B.shape[-2:]))
    perm = _perm(pivots, n).expand(batch + (n,))
    idx_shape = batch + (n, B.shape[-1])
    if not adjoint:     # A = P L U: X = U^-1 L^-1 P^T B
        idx = _inverse_perm(perm).unsqueeze(-1).expand(idx_shape)
        y = solve_triangular(LU, B.gather(-2, idx), upper=False, unitriangular=True)
        return _out(solve_triangular(LU, y, upper=True), out)
    # A^T = U^T L^T P^T: X = P L^-T U^-T B
    y = solve_triangular(LU.mT, B, upper=False)
    y = solve_triangular(LU.mT, y, upper=True, unitriangular=True)
    return _out(y.gather(-2, perm.unsqueeze(-1).expand(idx_shape)), out)


def _inverse_perm(perm):
    return perm.argsort(-1)


@float32_list
def lu_solve(input, LU_data, LU_pivots, *, out=None):
    """As torch.lu_solve (deprecated in PyTorch): linalg.lu_solve(LU, pivots, b)."""
    return linalg_lu_solve(LU_data, LU_pivots, input, out=out)


_LEGACY_LU = named_result("lu", ["LU", "pivots"])


def legacy_lu(A, pivot=True, get_infos=False, out=None):
    """As torch.lu: (LU, pivots) or, get_infos=True, (LU, pivots, infos)."""
    lu_, piv, info = _lu_factor(A, pivot, "torch.lu")
    return _out((lu_, piv, info) if get_infos else (lu_, piv), out)


# ---- matrix exponential --------------------------------------------------------------------------

def matrix_exp(input):
    """As torch.linalg.matrix_exp (torch.matrix_exp, Tensor.matrix_exp): exp(A) by scaling
    and squaring with a Pade 13 approximant."""
    check_matrix("linalg.matrix_exp", input)
    return call(OPS["linalg_matrix_exp"], (input,), {})


export(cholesky_solve)
export(cholesky_inverse)
export(triangular_solve)
export(lu_unpack)
export(lu_solve)
export(matrix_exp)
export(cholesky)
legacy_lu.__name__ = legacy_lu.__qualname__ = "lu"
export(legacy_lu)
for _name, _f in (("cholesky", cholesky), ("cholesky_solve", cholesky_solve),
                  ("cholesky_inverse", cholesky_inverse), ("triangular_solve", triangular_solve),
                  ("matrix_exp", matrix_exp), ("lu_solve", lu_solve), ("lu", legacy_lu)):
    setattr(Tensor, _name, _f)
