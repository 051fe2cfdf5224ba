"""Division and remainders PyTorch has as kernels of its own and llgrad writes as compositions
of the op table's ops: fmod, remainder (and %), floor_divide (and //=), rsub; their Tensor
methods and in-place forms (the rest of the elementwise compositions: functions_math.py)."""
from . import dtypes
from .dispatch import call
from .compose import attach
from .functions import export
from .methods import check_sub
from .methods_alpha import _alpha as alpha_checked
from .math_operands import as_type, in_dtype, tensor_input
from .tensor import Tensor
from ..ir import OPS
from .node_names import no_derivative, torch_node


@torch_node(lambda input, other, *a, **k: "FmodBackward1" if isinstance(other, Tensor) else "FmodBackward0")
def fmod(input, other):
    """As torch.fmod: the remainder of input / other with input's sign (C's fmod, exact)."""
    tensor_input("fmod", input, other)
    dtypes.no_bool_kernel((input, other), "fmod_cpu")
    rt = dtypes.result_type(input, other)
    other = dtypes.wrap_int(other, rt)      # (as as_type does input)
    if not rt.is_floating_point:
        a = as_type(input, rt)
        return a - a.div(other, rounding_mode="trunc") * other
    a = as_type(input, rt)
    b = as_type(other, rt) if isinstance(other, Tensor) else in_dtype(other, rt)
    return call(OPS["fmod_float"], (a, b), {})


def remainder(input, other):
    """As torch.remainder: the remainder of input / other with other's sign (Python's %)."""
    isinstance(other, Tensor) or tensor_input("remainder", input, other)    # (number % number)
    out = _remainder(input, other)      # (of a number by a tensor: no derivative, as PyTorch's)
    return out if isinstance(input, Tensor) else no_derivative(out, "remainder")


@torch_node(lambda input, other, *a, **k: "RemainderBackward1" if isinstance(other, Tensor) else "RemainderBackward0")
def _remainder(input, other):
    dtypes.no_bool_kernel((input, other), "remainder_cpu")
    rt = dtypes.result_type(input, other)
    a, other = as_type(input, rt), dtypes.wrap_int(other, rt)
    # (uint8 % an int8 0-dim -2 is % 254; float32 % 0.7 is % float32(0.7))
    other = as_type(other, rt) if isinstance(other, Tensor) else in_dtype(other, rt)
    if rt.is_floating_point:
        return call(OPS["remainder_float"], (a, other), {})
    # Python's % of integers, a - floor(a / b) * b: exact in the dtype's wrapping arithmetic
    # (the true remainder is in range; INT_MIN % -1 is 0), three ops where fmod's
    # a - trunc(a / b) * b and a sign fix-up took nine (int64 % 7: 15x PyTorch's time)
    return a - a.div(other, rounding_mode="floor") * other


def floor_divide(input, other):
    """As torch.floor_divide: input / other rounded down (div with rounding_mode='floor')."""
    if not isinstance(input, Tensor):
        input = as_type(input, dtypes.result_type(input, other))
    return no_derivative(input.div(other, rounding_mode="floor"), "floor_divide")


def floor_divide_(self, other):
    """In-place floor_divide, as torch.Tensor.floor_divide_."""
    return no_derivative(self.div_(other, rounding_mode="floor"), "floor_divide_")


def rsub(input, other, alpha=1):
    """As torch.rsub: other - alpha * input."""
    check_sub(other, input)
    input, alpha = alpha_checked(other, input, alpha)     # (sub's checks and wrapping)
    return call(OPS["rsub"], (input, other), {"alpha": alpha})


for _f, _inp in ((fmod, "fmod_"), (remainder, "remainder_"), (floor_divide, None)):
    attach(_f, inplace_name=_inp)
Tensor.floor_divide_ = Tensor.__ifloordiv__ = floor_divide_
Tensor.__mod__, Tensor.__imod__ = remainder, Tensor.remainder_
Tensor.__rmod__ = lambda self, other: remainder(other, self)
export(rsub)
del _f, _inp
