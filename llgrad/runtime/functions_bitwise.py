"""Bitwise functions and operators on integer and bool tensors (the ops of ir/ops_bitwise.py):
bitwise_and / or / xor / not, bitwise_left_shift / right_shift, gcd, lcm, as llgrad.*
functions, Tensor methods and in-place methods, and the operators & | ^ ~ << >> (and their
reflected and augmented forms), with PyTorch's promotion and its errors for floats.

The operators on bool operands whose result is bool run the logical ops (the same values;
llgrad's masks stay the logical ops they were), anything else the bitwise ops."""

from ..ir import OPS
from . import dtypes
from .dispatch import call
from .dispatch import scalar_type_name as tname
from .functions import export
from .inplace import call_inplace, check_shape_into
from .numpy_scalars import python_number
from .tensor import Tensor
from .out_write import into

_NUMBERS = (bool, int, float)
# op name -> the name of PyTorch's CPU kernel in its "not implemented" message
_KERNEL = {"bitwise_and": "bitwise_and_cpu", "bitwise_or": "bitwise_or_cpu",
           "bitwise_xor": "bitwise_xor_cpu", "bitwise_not": "bitwise_not_cpu",
           "bitwise_left_shift": "lshift_cpu", "bitwise_right_shift": "rshift_cpu",
           "gcd": "gcd_cpu", "lcm": "lcm_cpu"}
_LOGICAL = {"bitwise_and": "logical_and", "bitwise_or": "logical_or",
            "bitwise_xor": "logical_xor"}
_NO_BOOL = ("bitwise_left_shift", "bitwise_right_shift", "gcd", "lcm")


def _py(x):
    """A NumPy scalar as the Python number PyTorch reads it as (np.bool_: a float)."""
    return python_number(x)


def _type_name(x):
    return "Tensor" if isinstance(x, Tensor) else type(x).__name__


def _bad_arguments(name, args):
    return TypeError(f"{name}() received an invalid combination of arguments - got "
                     f"({', '.join(_type_name(a) for a in args)}), but expected one of:")


def _check_dtype(name, dt):
    if dt.is_floating_point or (dt is dtypes.bool_ and name in _NO_BOOL):
        raise NotImplementedError(f"\"{_KERNEL[name]}\" not implemented for '{tname(dt)}'")


def _operands(name, a, b, shown):
    """(a, b) checked: tensors or numbers, not two numbers; the result dtype integral."""
    if not all(isinstance(x, Tensor) or isinstance(x, _NUMBERS) for x in (a, b)) or \
            not (isinstance(a, Tensor) or isinstance(b, Tensor)):
        raise _bad_arguments(name, shown)
    if name in ("gcd", "lcm"):
        for x, pos in ((a, 1), (b, 2)):
            if not isinstance(x, Tensor):
                arg = "input" if pos == 1 else "other"
                p = pos - (0 if shown[0] is a else 1)
                raise TypeError(f"{name}(): argument '{arg}' (position {p}) must be Tensor, "
                                f"not {type(x).__name__}")
    rt = dtypes.result_type(a, b)
    _check_dtype(name, rt)
    return rt


def _wrapped(name, other, rt):
    """A Python int shift count as PyTorch reads it: wrapped into the result dtype first
    (an int8 tensor << 2 ** 40 shifts by 0)."""
    return dtypes.wrap_int(other, rt) if name in _NO_BOOL[:2] and rt is not None else other


def _binary(name):
    op = OPS[name]

    def function(input, other, *, out=None):
        input, other = _py(input), _py(other)
        rt = _operands(name, input, other, (input, other))
        r = call(op, (input, _wrapped(name, other, rt)), {})
        return into(out, r)

    def method(self, other):
        other = _py(other)
        rt = _operands(name, self, other, (other,))
        return call(op, (self, _wrapped(name, other, rt)), {})

    def inplace(self, other):
        other = _py(other)
        if not isinstance(other, (Tensor,) + _NUMBERS):
            raise _bad_arguments(name + "_", (other,))
        check_shape_into(self, other)
        rt = dtypes.result_type(self, other)
        if rt is not None and rt._cat <= self._dtype._cat:
            _operands(name, self, other, (other,))
        return call_inplace(op, self, (self, _wrapped(name, other, rt)), {})
    function.__name__ = method.__name__ = name
    inplace.__name__ = name + "_"
    for f, what in ((function, f"torch.{name}"), (method, f"torch.Tensor.{name}"),
                    (inplace, f"torch.Tensor.{name}_")):
        f.__doc__ = f"As {what} (integer and bool tensors)."
    export(function)
    setattr(Tensor, name, method)
    setattr(Tensor, name + "_", inplace)
    return function


bitwise_and, bitwise_or, bitwise_xor = (_binary(n) for n in ("bitwise_and", "bitwise_or",
                                                              "bitwise_xor"))
bitwise_left_shift, bitwise_right_shift = (_binary(n) for n in ("bitwise_left_shift",
                                                                 "bitwise_right_shift"))
gcd, lcm = _binary("gcd"), _binary("lcm")
export(Tensor.gcd_, "gcd_")
export(Tensor.lcm_, "lcm_")


def bitwise_not(input, *, out=None):
    """As torch.bitwise_not (integer and bool tensors)."""
    if not isinstance(input, Tensor):
        raise _bad_arguments("bitwise_not", (input,))
    _check_dtype("bitwise_not", input._dtype)
    r = call(OPS["bitwise_not"], (input,), {})
    return into(out, r)


def _bitwise_not_(self):
    _check_dtype("bitwise_not", self._dtype)
    return call_inplace(OPS["bitwise_not"], self, (self,), {})


export(bitwise_not)
Tensor.bitwise_not = lambda self: bitwise_not(self)
Tensor.bitwise_not.__name__, Tensor.bitwise_not.__doc__ = "bitwise_not", bitwise_not.__doc__
Tensor.bitwise_not_ = _bitwise_not_
_bitwise_not_.__name__, _bitwise_not_.__doc__ = "bitwise_not_", "As torch.Tensor.bitwise_not_."


# ---- the operators ---------------------------------------------------------------------------

def _operator(name, reflected=False, augmented=False):
    op = OPS[name]
    logical = OPS[_LOGICAL[name]] if name in _LOGICAL else None

    def fn(self, other):
        other = _py(other)
        if not isinstance(other, (Tensor,) + _NUMBERS):
            return NotImplemented
        a, b = (other, self) if reflected else (self, other)
        if augmented:
            return getattr(self, name + "_")(other)
        rt = _operands(name, a, b, (b,))
        if logical is not None and rt is dtypes.bool_:
            return call(logical, (a, b), {})
        return call(op, (_wrapped(name, a, rt), _wrapped(name, b, rt)), {})
    return fn


for _name, _sym in (("bitwise_and", "and"), ("bitwise_or", "or"), ("bitwise_xor", "xor"),
                    ("bitwise_left_shift", "lshift"), ("bitwise_right_shift", "rshift")):
    for _prefix, _kw in (("", {}), ("r", {"reflected": True}), ("i", {"augmented": True})):
        _f = _operator(_name, **_kw)
        _f.__name__ = f"__{_prefix}{_sym}__"
        _f.__doc__ = f"As torch.Tensor.__{_prefix}{_sym}__."
        setattr(Tensor, _f.__name__, _f)


def __invert__(self):
    """~x, as PyTorch: bitwise not of an integer tensor, logical not of a bool one."""
    if self._dtype.is_floating_point:
        raise TypeError("~ (operator.invert) is only implemented on integer and Boolean-type "
                        "tensors")
    if self._dtype is dtypes.bool_:
        return call(OPS["logical_not"], (self,), {})
    return call(OPS["bitwise_not"], (self,), {})


Tensor.__invert__ = __invert__
