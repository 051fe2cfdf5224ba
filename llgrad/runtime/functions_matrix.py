"""Inverse and determinants of (batches of) square matrices, with PyTorch's checks and
messages: torch.inverse / linalg.inv, det / linalg.det, slogdet / linalg.slogdet (a named
tuple (sign, logabsdet)), logdet (slogdet's logabsdet, nan where the determinant is
negative: PyTorch's own composition, a where). Ops of llgrad/ir/ops_matrix.py."""
import math

from ..ir import OPS
from .dispatch import call
from .dispatch import scalar_type_name as tname
from .functions import export, where
from .return_types import named_result
from .tensor import Tensor
from .out_write import into
from .autocast_cast import float32_list


def check_square(name, A, fn=None):
    """PyTorch's errors for A that is no tensor (TypeError naming fn, else name's last part),
    or not a batch of square matrices."""
    if not isinstance(A, Tensor):
        raise TypeError(f"{fn or name.split('.')[-1]}(): argument 'input' (position 1) must be "
                        f"Tensor, not {type(A).__name__}")
    if A._data.ndim < 2:
        raise RuntimeError(f"{name}: The input tensor A must have at least 2 dimensions.")
    n, m = A._data.shape[-2:]
    if n != m:
        raise RuntimeError(f"{name}: A must be batches of square matrices, but they are {n} by "
                           f"{m} matrices")


def _check(name, A):
    check_square(name, A)
    if A._dtype.is_complex:
        raise NotImplementedError(f"llgrad: {name} is not implemented for complex tensors")
    if not A._dtype.is_floating_point:
        raise RuntimeError(f"{name}: Expected a floating point or complex tensor as input. Got "
                           f"{tname(A._dtype)}")
    if A._dtype.name == "float16":
        raise NotImplementedError("\"lu_cpu\" not implemented for 'Half'")


class _LinAlgError(RuntimeError):
    """A matrix the operation cannot handle (singular), as torch.linalg.LinAlgError (whose
    class is named _LinAlgError)."""


LinAlgError = _LinAlgError


@float32_list
def inverse(input, *, out=None):
    """As torch.inverse (linalg.inv): the inverse of each square matrix; a singular one raises
    llgrad.linalg.LinAlgError naming its zero pivot, as PyTorch (inside llgrad.compile the
    check reads the info the op returns: a value guard)."""
    _check("linalg.inv", input)
    r, info = call(OPS["linalg_inv_ex"], (input,), {})
    if info._data.size and not info.is_meta and bool((info != 0).any()):
        flat = info.reshape(-1).tolist()
        b = next(i for i, k in enumerate(flat) if k)
        where = f"(Batch element {b}): " if input._data.ndim > 2 else ""
        raise LinAlgError(f"linalg.inv: {where}The diagonal element {flat[b]} is zero, the "
                          "inversion could not be completed because the input matrix is "
                          "singular.")
    return into(out, r)


def det(input):
    """As torch.det (linalg.det): the determinant of each square matrix."""
    _check("linalg.det", input)
    return call(OPS["linalg_det"], (input,), {})




_SLOGDET = named_result("slogdet", ["sign", "logabsdet"])
_LINALG_SLOGDET = named_result("linalg_slogdet", ["sign", "logabsdet"])


def _slogdet(input, name="linalg.slogdet"):
    _check(name, input)
    return call(OPS["linalg_slogdet"], (input,), {})


def slogdet(input):
    """As torch.slogdet: (sign, log|det|) of each square matrix."""
    return _SLOGDET(*_slogdet(input))


def linalg_slogdet(A, *, out=None):
    """As torch.linalg.slogdet: (sign, log|det|) of each square matrix."""
    return _LINALG_SLOGDET(*_slogdet(A))


def logdet(input):
    """As torch.logdet: log det of each square matrix (nan where it is negative, -inf where it
    is 0): PyTorch's where over slogdet."""
    sign, logabsdet = _slogdet(input, "logdet")
    return where(sign == -1, math.nan, logabsdet)


for _f in (inverse, det, slogdet, logdet):
    export(_f)
    setattr(Tensor, _f.__name__, _f)
