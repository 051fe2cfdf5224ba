"""Tensor.div / div_ with PyTorch's rounding modes: one div_mode node on floats, exact
integer division (ir/ops_bitwise.py div_int) on integers, PyTorch's errors for a zero
integer divisor, bools, and an in-place result its tensor cannot hold."""
import numpy as np

from ..ir import OPS
from . import dtypes
from .dispatch import call, scalar_type_name
from .inplace import call_inplace, check_shape_into
from .tensor import Tensor

NO_MODE = object()      # div(x, y) (div.Tensor) apart from div(x, y, rounding_mode=None)
_DIV, _DIV_MODE, _DIV_INT = OPS["div"], OPS["div_mode"], OPS["div_int"]


def _check_mode(rounding_mode):
    if rounding_mode not in (None, "floor", "trunc"):
        raise RuntimeError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' "
                           f"but found '{rounding_mode}'")


def _integer_operands(self, other, rounding_mode):
    """Whether self / other rounds in integers (PyTorch's checks of them made)."""
    rt = dtypes.result_type(self, other)
    if rt.is_floating_point:
        return False
    if rt is dtypes.bool_:
        raise NotImplementedError(f"\"div_{rounding_mode}_cpu\" not implemented for 'Bool'")
    # (raised by PyTorch's kernel on a zero it divides by: none in an empty result; a
    # Python int is wrapped into the dtype first, so uint8 // 256 divides by zero)
    # (a 0-d tensor divisor is cast into the dtype first too: int16 256 is int8 0)
    zero = (other.to(rt) == 0).any() if isinstance(other, Tensor) else \
        dtypes.wrap_int(other, rt) == 0
    if zero and _numel(self, other):
        raise RuntimeError("ZeroDivisionError")     # (PyTorch's words)
    return True


def _numel(self, other):
    shapes = [x._data.shape for x in (self, other) if isinstance(x, Tensor)]
    return int(np.prod(np.broadcast_shapes(*shapes)))


def div(self, other, rounding_mode=NO_MODE):
    if rounding_mode is NO_MODE:
        return call(_DIV, (self, other), {})
    _check_mode(rounding_mode)
    if rounding_mode is not None and _integer_operands(self, other, rounding_mode):
        return call(_DIV_INT, (self, other), {"rounding_mode": rounding_mode})
    # one op, one node (DivBackward2), as PyTorch's div.Tensor_mode
    return call(_DIV_MODE, (self, other), {"rounding_mode": rounding_mode})


def div_(self, other, rounding_mode=NO_MODE):
    if rounding_mode is NO_MODE:
        return call_inplace(_DIV, self, (self, other), {})
    _check_mode(rounding_mode)
    check_shape_into(self, other)
    rt = dtypes.result_type(self, other)
    if rt._cat > self._dtype._cat:      # (before the kernel's ZeroDivisionError, as PyTorch)
        raise RuntimeError(f"result type {scalar_type_name(rt)} can't be cast to the desired "
                           f"output type {scalar_type_name(self._dtype)}")
    if rounding_mode is not None and _integer_operands(self, other, rounding_mode):
        return call_inplace(_DIV_INT, self, (self, other), {"rounding_mode": rounding_mode})
    # (a float result into an integer self: call_inplace raises PyTorch's cast error)
    return call_inplace(_DIV_MODE, self, (self, other), {"rounding_mode": rounding_mode})
