"""llgrad.* functions of issue 21 that are compositions of existing ops: meshgrid,
isclose / allclose, and the in-place clamp functions (llgrad.clamp_, clip_, clamp_min_,
clamp_max_)."""
from __future__ import annotations
import warnings

from . import dtypes, functions
from .dispatch import scalar_type_name as tname
from .functions import _method_fn
from .tensor import Tensor


def meshgrid(*tensors: Tensor, indexing: str | None = None) -> tuple[Tensor, ...]:
    """Grids of 0-d or 1-d tensors: each a view (expand) of its tensor. indexing='xy' swaps
    the first two grids' roles (Cartesian), 'ij' (the default) is matrix indexing."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing is None:
        warnings.warn("torch.meshgrid: in an upcoming release, it will be required to pass the "
                      "indexing argument.", UserWarning, stacklevel=2)
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f'torch.meshgrid: indexing must be one of "xy" or "ij", but '
                           f'received: {indexing}')
    if not tensors:
        raise RuntimeError("meshgrid expects a non-empty TensorList")
    for t in tensors:
        if t.ndim > 1:
            raise RuntimeError(f"torch.meshgrid: Expected 0D or 1D tensor in the tensor list but "
                               f"got: {t}")
        if t.dtype != tensors[0].dtype:
            raise RuntimeError("meshgrid expects all tensors to have the same dtype")
    ts = list(tensors)
    swap = indexing == "xy" and len(ts) >= 2
    if swap:
        ts[0], ts[1] = ts[1], ts[0]
    shape = [t.numel() for t in ts]
    grids = []
    for i, t in enumerate(ts):
        view = [1] * len(ts)
        view[i] = -1
        grids.append(t.view(view).expand(shape))
    if swap:
        grids[0], grids[1] = grids[1], grids[0]
    return tuple(grids)


def isclose(input: Tensor, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08,
            equal_nan: bool = False) -> Tensor:
    """|input - other| <= atol + rtol * |other| where finite, or equal (inf == inf), or both
    nan with equal_nan (PyTorch's isclose, elementwise and broadcast)."""
    if input._dtype is not other._dtype:
        raise RuntimeError(f"{tname(input._dtype)} did not match {tname(other._dtype)}")
    if rtol < 0:
        raise RuntimeError(f"rtol must be greater than or equal to zero, but got {rtol}")
    if atol < 0:
        raise RuntimeError(f"atol must be greater than or equal to zero, but got {atol}")
    close = input == other
    if equal_nan and input._dtype._cat >= 2:
        close = close | (input.isnan() & other.isnan())
    if rtol == 0 and atol == 0:
        return close
    a, b = input, other
    if a._dtype._cat < 2:
        a, b = a.to(dtypes.get_default_dtype()), b.to(dtypes.get_default_dtype())
    allowed = (b * rtol).abs() + atol
    actual = (a - b).abs()
    return close | (actual.isfinite() & (actual <= allowed))


def allclose(input: Tensor, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08,
             equal_nan: bool = False) -> bool:
    """Whether input and other are elementwise close (isclose everywhere), as torch.allclose."""
    return bool(isclose(input, other, rtol, atol, equal_nan).all())


Tensor.isclose = isclose
Tensor.allclose = allclose
functions.allclose = allclose       # (PyTorch's rule, dtype check included, over NumPy's)
for _n in ("isclose", "clamp_", "clip_", "clamp_min_", "clamp_max_"):
    _method_fn(_n)
