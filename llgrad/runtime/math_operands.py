"""How the elementwise compositions (functions_math.py, functions_division.py and the other
functions_* modules) read their operands: the floating dtype an integer input goes to, a
number as a tensor of the result's dtype, a float rounded as the kernel reads it, PyTorch's
error for a number input, and a computation done in float64 then rounded back."""
import numpy as np

from . import dtypes
from .creation import tensor as _tensor
from .tensor import Tensor


def floating(x):
    """x as a floating or complex tensor: integers and bools go to the default dtype
    (PyTorch's unary float ops: log2(int tensor) is float32)."""
    return x if x._dtype._cat >= 2 else x.to(dtypes.get_default_dtype())


def float_type(*operands):
    """The promoted dtype of the operands, the default float when that is integral."""
    rt = dtypes.result_type(*operands)
    return rt if rt.is_floating_point else dtypes.get_default_dtype()


def as_type(x, dt):
    """A tensor or Python number as a tensor of dtype dt (an int wrapped into it, as PyTorch
    reads a Python int next to an integer tensor: uint8 // 300 is // 44)."""
    if isinstance(x, Tensor):
        return x if x._dtype is dt else x.to(dt)
    return _tensor(dtypes.wrap_int(x, dt), dtype=dt)


def in_dtype(v, dt):
    """A Python float operand as PyTorch's kernel of floating dtype dt reads it: rounded
    to dt (float32 % 0.7 divides by 0.699999988)."""
    return float(np.asarray(v, dt.np)) if type(v) is float and dt.is_floating_point else v


def tensor_input(name, input, other):
    """PyTorch's error for a function with no number-input form given a number input."""
    if not isinstance(input, Tensor):
        shown = ", ".join("Tensor" if isinstance(x, Tensor) else type(x).__name__
                          for x in (input, other))
        raise TypeError(f"{name}() received an invalid combination of arguments - got "
                        f"({shown}), but expected one of:")


def _in_double(x, fn):
    """fn computed in float64 for a float32 / float16 x, then rounded back: the result is
    then (nearly always) the correctly rounded value PyTorch's float kernel gives, where the
    composition in float32 would be an ulp or two off."""
    return in_double(x, fn)


def in_double(x, fn):
    """fn(x) in float64 (complex128 for a complex x), rounded back to x's dtype."""
    wide = dtypes.complex128 if x._dtype.is_complex else dtypes.float64
    if x._dtype is wide:
        return fn(x)
    return fn(x.to(wide)).to(x._dtype)
