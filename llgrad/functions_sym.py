"""torch.*'s symbolic-shape helpers as plain Python (llgrad's shapes are concrete ints, and
the sizes a compiled function's code reads in its second trace SymInts that act as ints:
sym_int is int, sym_max max with PyTorch's float promotion, ...), the SymInt / SymFloat /
SymBool names (SymInt that of those sizes, for `isinstance(n, (int, torch.SymInt))`; no value
is a SymFloat or SymBool), the build flags (has_lapack, ...), OutOfMemoryError, GradScaler,
empty_permuted and _assert."""
import builtins
import math

import numpy as np

from .amp.grad_scaler import GradScaler
from .cuda import OutOfMemoryError
from .runtime.creation import empty
from .runtime.sym_int import SymInt

__all__ = ["sym_int", "sym_float", "sym_max", "sym_min", "sym_not", "sym_sqrt", "sym_sum",
           "sym_ite", "SymInt", "SymFloat", "SymBool", "has_lapack", "has_mkl", "has_openmp",
           "has_spectral", "OutOfMemoryError", "GradScaler", "empty_permuted",
           "sym_constrain_range", "sym_constrain_range_for_size", "sym_fresh_size",
           "is_vulkan_available", "_assert"]

has_lapack = True       # (linalg runs on NumPy's LAPACK)
has_mkl = False
has_openmp = False
has_spectral = True


class SymFloat:
    """As torch.SymFloat: the type of a symbolic float (see SymInt)."""


class SymBool:
    """As torch.SymBool: the type of a symbolic bool (see SymInt)."""


_ALL = (np.integer, np.floating, int, float)
_FLOATS = (np.floating, float)


def sym_int(a):
    """As torch.sym_int: int(a)."""
    return builtins.int(a)


def sym_float(a):
    """As torch.sym_float: float(a)."""
    return builtins.float(a)


def _minmax(fn, a, b):
    for v in (a, b):
        if not isinstance(v, _ALL):
            raise AssertionError(f"expected {_ALL}, got {type(v)}")
    r = fn(a, b)
    return builtins.float(r) if isinstance(a, _FLOATS) or isinstance(b, _FLOATS) else r


def sym_max(a, b):
    """As torch.sym_max: max of two numbers, a float when either is."""
    return _minmax(builtins.max, a, b)


def sym_min(a, b):
    """As torch.sym_min: min of two numbers, a float when either is."""
    return _minmax(builtins.min, a, b)


def sym_not(a):
    """As torch.sym_not: not a."""
    return not a


def sym_sqrt(a):
    """As torch.sym_sqrt: math.sqrt(a)."""
    return math.sqrt(a)


def sym_sum(*args):
    """As torch.sym_sum: the sum of the numbers (given as one list or as arguments)."""
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        args = args[0]
    return builtins.sum(args)


def sym_ite(b, t, f):
    """As torch.sym_ite: t if b else f (b a bool, t and f of one type)."""
    if not isinstance(b, (SymBool, builtins.bool)):
        raise AssertionError(f"expected SymBool or bool, got {type(b)}")
    if type(t) is not type(f):
        raise AssertionError(f"type mismatch: {type(t)} vs {type(f)}")
    return t if b else f


def _constrain(size, low, high):
    if not low <= size <= high:
        raise RuntimeError(f"Invalid value range for {size} between [{low}, {high}].")


def sym_constrain_range(size, *, min=None, max=None):  # noqa: A002 (PyTorch's names)
    """As torch.sym_constrain_range on a concrete int: raises unless min <= size <= max."""
    _constrain(size, -2 ** 63 if min is None else min, 2 ** 63 - 1 if max is None else max)


def sym_constrain_range_for_size(size, *, min=None, max=None):  # noqa: A002
    """As torch.sym_constrain_range_for_size on a concrete int: as sym_constrain_range, min
    0 by default."""
    _constrain(size, 0 if min is None else min, 2 ** 63 - 1 if max is None else max)


def sym_fresh_size(expr):
    """As torch.sym_fresh_size: expr itself (llgrad's sizes are concrete)."""
    return expr


def is_vulkan_available():
    """False, as torch.is_vulkan_available on a build without Vulkan."""
    return False


def empty_permuted(size, physical_layout, *, dtype=None, layout=None, device=None,
                   requires_grad=False, pin_memory=False):
    """As torch.empty_permuted: an uninitialised tensor of logical shape size whose memory
    runs in the order physical_layout gives (its dims from outermost to innermost)."""
    size, order = tuple(size), tuple(physical_layout)
    if len(size) != len(order):
        raise RuntimeError(f"Number of dimensions in size does not match the length of the "
                           f"physical_layout; i.e. len(size) = {len(size)} is not equal to "
                           f"len(physical_layout) = {len(order)}")
    seen = set()
    for d in order:
        if not 0 <= d < len(size):
            raise RuntimeError(f"Dimension out of range (expected to be between 0 and "
                               f"{len(size) - 1}, but got {d} at index {order.index(d)}).  NB: "
                               f"negative dims not currently supported; file an issue if you "
                               f"want it.")
        if d in seen:
            raise RuntimeError("Duplicate dim not allowed")
        seen.add(d)
    phys = empty(tuple(size[d] for d in order), dtype=dtype, device=device)
    inverse = [order.index(d) for d in range(len(order))]
    out = phys.permute(inverse)
    return out.requires_grad_(True) if requires_grad else out


def _assert(condition, message):
    """As torch._assert (the assert PyTorch can trace; timm's patch embeddings call it):
    raises AssertionError(message) when condition is false (a one-element tensor's truth
    value as bool() reads it)."""
    if not condition:
        raise AssertionError(message)
