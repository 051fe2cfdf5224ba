"""torch.linalg.ldl_factor_ex / ldl_factor / ldl_solve with PyTorch's signatures, checks and
named-tuple results (ops of llgrad/ir/ops_linalg_ldl.py)."""
from ..ir import OPS
from .dispatch import call
from .dispatch import scalar_type_name as tname
from .functions_linalg_solve import _out, check_matrix
from .return_types import named_result
from .shapes import broadcast_shapes

_LDL_FACTOR = named_result("linalg_ldl_factor", ["LD", "pivots"])
_LDL_FACTOR_EX = named_result("linalg_ldl_factor_ex", ["LD", "pivots", "info"])


def ldl_factor_ex(A, *, hermitian=False, check_errors=False, out=None):
    """As torch.linalg.ldl_factor_ex: (LD, pivots, info), LAPACK's sytrf (lower triangle)."""
    check_matrix("torch.linalg.ldl_factor_ex", A)
    ld, piv, info = call(OPS["linalg_ldl_factor_ex"], (A,), {"hermitian": bool(hermitian)})
    if check_errors:
        _raise_for_info(info, "torch.linalg.ldl_factor_ex")
    return _out(_LDL_FACTOR_EX(ld, piv, info), out)


def ldl_factor(A, *, hermitian=False, out=None):
    """As torch.linalg.ldl_factor: (LD, pivots); a singular D raises, as in PyTorch."""
    check_matrix("torch.linalg.ldl_factor", A)
    ld, piv, info = call(OPS["linalg_ldl_factor_ex"], (A,), {"hermitian": bool(hermitian)})
    _raise_for_info(info, "torch.linalg.ldl_factor")
    return _out(_LDL_FACTOR(ld, piv), out)


def _raise_for_info(info, name):
    # (a value read: a guard inside llgrad.compile)
    if info._data.size and not info.is_meta and bool((info != 0).any()):
        k = next(k for k in info.reshape(-1).tolist() if k)
        raise RuntimeError(f"{name}: Unknown error code: {k}.")


def ldl_solve(LD, pivots, B, *, hermitian=False, out=None):
    """As torch.linalg.ldl_solve: X with A X = B from ldl_factor's (LD, pivots)."""
    name = "torch.linalg.ldl_solve"
    check_matrix(name, LD, arg="LD")
    check_matrix(name, B, square=False, arg="B")
    if B._dtype is not LD._dtype:
        raise RuntimeError(f"Expected b and A to have the same dtype, but found b of type "
                           f"{tname(B._dtype)} and A of type {tname(LD._dtype)} instead.")
    n = LD.shape[-1]
    if B.shape[-2] != n:
        raise RuntimeError(f"Incompatible matrix sizes for {name}: each A matrix is {n} by {n} "
                           f"but each b matrix is {B.shape[-2]} by {B.shape[-1]}")
    if tuple(pivots.shape) != tuple(LD.shape[:-1]):
        raise RuntimeError(f"{name}: Expected LD.shape[:-1] and pivots.shape to be the same, "
                           f"but got pivots with shape {tuple(pivots.shape)} instead")
    if pivots._dtype.is_floating_point or pivots._dtype.is_complex:
        raise RuntimeError(f"{name}: Expected pivots to be integers. Got {tname(pivots._dtype)}")
    broadcast_shapes(tuple(LD.shape[:-2]), tuple(B.shape[:-2]))
    return _out(call(OPS["linalg_ldl_solve"], (LD, pivots, B), {"hermitian": bool(hermitian)}),
                out)
