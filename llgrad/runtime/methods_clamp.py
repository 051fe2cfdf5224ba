"""Tensor.clamp / clamp_ / clamp_min / clamp_max with PyTorch's checks: a bound must fit an
integer tensor, bools have no kernel (but for one tensor bound), and clamp_ with number
bounds names self's C type in its cast error."""
from ..ir import OPS
from . import dtypes
from .creation_checks import int_bounds_fit as _fit
from .dispatch import call, scalar_type_name
from .inplace import call_inplace
from .tensor import Tensor

_CLAMP, _CMIN, _CMAX = OPS["clamp"], OPS["clamp_min"], OPS["clamp_max"]
_CATEGORY = {bool: 0, int: 1, float: 2}     # (scalar_category of the common numbers)


def _one_kind(min, max):
    """PyTorch's parser takes clamp's bounds as Tensors or as Numbers: with one of each, a
    0-d tensor that needs no grad is read as a Number (so it promotes as a number does:
    int8.clamp(-2, int32 0-d) stays int8), anything else is its TypeError."""
    if min is None or max is None or isinstance(min, Tensor) == isinstance(max, Tensor):
        return min, max
    t = min if isinstance(min, Tensor) else max
    if t._data.ndim or t.requires_grad:
        got = ", ".join(type(b).__name__ for b in (min, max))
        raise TypeError(f"clamp() received an invalid combination of arguments - got (Tensor, "
                        f"{got}), but expected one of:\n * (Tensor min = None, Tensor max = "
                        "None)\n * (Number min = None, Number max = None)")
    return (min.item(), max) if t is min else (min, max.item())


def _clamp_args(self, min, max):
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    _fit(self, min, max)
    tensors = isinstance(min, Tensor) + isinstance(max, Tensor)
    if tensors != 1:        # (PyTorch's bool kernels: none but clamp with one tensor bound)
        bounds = [b for b in (min, max) if b is not None]
        dtypes.no_bool_kernel([self] + bounds, "clamp_cpu" if tensors else "clamp_scalar_cpu"
                              if len(bounds) == 2 else "clamp_min_scalar_cpu" if max is None
                              else "clamp_max_scalar_cpu")


def clamp(self, min=None, max=None):
    min, max = _one_kind(min, max)
    _clamp_args(self, min, max)
    return call(_CLAMP, (self, min, max), {})


def _scalar_clamp_cast(self, *bounds):
    """PyTorch's cast check of clamp_ with number bounds, which names self's C type."""
    top = self._dtype._cat
    for b in bounds:        # (the result's category is the highest of its operands')
        if isinstance(b, Tensor):
            return
        if b is not None and _CATEGORY.get(type(b), 3) > top:
            break
    else:
        return
    rt = dtypes.result_type(self, *[b for b in bounds if b is not None])
    if not any(isinstance(b, Tensor) for b in bounds) and rt._cat > self._dtype._cat:
        raise RuntimeError(f"result type {scalar_type_name(rt)} can't be cast to the desired "
                           f"output type {dtypes.C_NAMES[self._dtype.name]}")


def clamp_(self, min=None, max=None):
    min, max = _one_kind(min, max)
    _clamp_args(self, min, max)
    _scalar_clamp_cast(self, min, max)
    return call_inplace(_CLAMP, self, (self, min, max), {})


def _one_bound(self, bound, kernel):
    """The bound checked (a number into an integer self; a bool number of a bool self has no
    PyTorch kernel: a bool tensor bound has)."""
    if not isinstance(bound, Tensor):
        dtypes.no_bool_kernel([self, bound], kernel)
    return _fit(self, bound)


def clamp_min(self, min):
    return call(_CMIN, (self, _one_bound(self, min, "clamp_min_scalar_cpu")), {})


def clamp_max(self, max):
    return call(_CMAX, (self, _one_bound(self, max, "clamp_max_scalar_cpu")), {})


def clamp_min_(self, min):
    _scalar_clamp_cast(self, min)
    return call_inplace(_CMIN, self, (self, _one_bound(self, min, "clamp_min_scalar_cpu")), {})


def clamp_max_(self, max):
    _scalar_clamp_cast(self, max)
    return call_inplace(_CMAX, self, (self, _one_bound(self, max, "clamp_max_scalar_cpu")), {})
