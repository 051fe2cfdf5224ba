"""Tensor methods and operators: thin wrappers that normalise arguments and call the
dispatcher with an op from the op table."""
import numbers

import numpy as np

from ..ir import OPS
from ..ir.optable import method_doc, on_declare
from . import dtypes, symbolic_uses
from .creation import full_op, tensor
from .creation_checks import fill_value_fits
from .deprecated_overloads import value_first
from .device import NoCudaError, check as check_device
from .dispatch import call, scalar_type_name
from .inplace import _check_inplace, call_inplace, check_shape_into
from .memory_formats import clone, contiguous, format_to, real_cast_warning
from .methods_alpha import add, add_, check_sub, stand_in_value, sub, sub_
from .methods_clamp import clamp, clamp_, clamp_max, clamp_max_, clamp_min, clamp_min_
from .methods_div import div, div_
from .node_names import no_derivative
from .numpy_scalars import python_number
from .shapes import broadcast_shapes, check_condition
from .symbolic_scalar import SymbolicScalar
from .tensor import Tensor


def _op(self, name, *inputs, **attrs):
    return call(OPS[name], (self,) + inputs, attrs)


def _iop(self, name, *inputs, **attrs):
    return call_inplace(OPS[name], self, (self,) + inputs, attrs)


Tensor._op = _op
Tensor._iop = _iop


def _def(name, fn, op=None):
    fn.__name__ = name
    fn.__doc__ = fn.__doc__ or method_doc(name, op)     # ("As torch.Tensor.<name>.")
    setattr(Tensor, name, fn)


# ---- the methods an op declares (OpDef.methods / inplace), for ops declared now and later --

def _declared_methods(op):
    for name in op.methods:
        _def(name, _method(op, name, call), op)
    for name in op.inplace:
        _def(name, _method(op, name, lambda o, inputs, attrs:
                           call_inplace(o, inputs[0], inputs, attrs)), op)


def _method(op, name, run):
    """The Tensor method of op: its operands after self, at most as many as it takes (an
    extra one would reach NumPy's impl as its out=: x.exp(y) would write into y)."""
    most = len(op.args) - 1

    def method(self, *operands, **named):
        if named:                   # (x.mul(other=y), torch.eq(a, other=b): torch's names)
            operands = _named_operands(op, name, operands, named)
        if len(operands) > most:
            raise TypeError(f"{name}() takes no arguments ({len(operands)} given)" if not most
                            else f"{name}() takes {most} positional argument"
                            f"{'s' * (most > 1)} but {len(operands)} were given")
        return run(op, (self,) + operands, {})
    return method


def _named_operands(op, name, operands, named):
    """operands with those given by op's argument names after them, as PyTorch's signatures
    take them; an unknown name, one given twice, or a gap raise its TypeError."""
    names = op.args[1 + len(operands):]
    for k in named:
        if k not in names:
            why = "got multiple values for argument" if k in op.args else \
                "got an unexpected keyword argument"
            raise TypeError(f"{name}() {why} '{k}'")
    given = list(operands)
    for k in names[:len(named)]:
        if k not in named:
            raise TypeError(f"{name}() missing 1 required positional argument: '{k}'")
        given.append(named[k])
    return tuple(given)


on_declare(_declared_methods)
Tensor.__pos__ = lambda self: self
_COMPARABLE = (Tensor, bool, int, float, complex, np.generic, np.ndarray)


def _comparison(op):
    """x == None is False, x != 'a' True, as PyTorch's (its TypeError becomes NotImplemented,
    so `None in [x]` works): only tensors and numbers compare elementwise."""
    def f(self, other):
        return call(op, (self, other), {}) if isinstance(other, _COMPARABLE) else NotImplemented
    return f


for _n in ("eq", "ne", "lt", "le", "gt", "ge"):
    _def(f"__{_n}__", _comparison(OPS[_n]))
_def("__rpow__", (lambda o: lambda self, other: _no_bool_pow(self, other) or
                  call(o, (other, self), {}))(OPS["pow"]))


def _no_bool_pow(self, base):
    dtypes.no_bool_kernel((self, base), "pow")


_RSUB, _POW = OPS["rsub"], OPS["pow"]


def _check_int_pow(self, exponent):
    # NumPy wraps the exponent into uint8 (or words the error its own way)
    if type(exponent) is int and dtypes.check_int_operand(exponent) < 0 \
            and not self._dtype.is_floating_point \
            and not getattr(self._dtype, "is_complex", False):
        raise RuntimeError("Integers to negative integer powers are not allowed.")
    if type(exponent) is int and self._dtype._cat == 1 or type(exponent) in (int, float) \
            and self._dtype.name in ("float16", "bfloat16"):    # (uint8 ** 300, half ** 7e4)
        fill_value_fits(exponent, self._dtype)


def _bool_pow(self, exponent):
    """PyTorch's pow of bools: no kernel, except for an exponent of True (self) or False
    (ones), which it never computes."""
    if self._dtype is not dtypes.bool_ or dtypes.result_type(self, exponent) is not dtypes.bool_:
        return None
    if type(exponent) is bool:
        return self.clone() if exponent else full_op(tuple(self._data.shape), True, dtypes.bool_)
    raise NotImplementedError("\"pow\" not implemented for 'Bool'")


def pow(self, exponent):
    _check_int_pow(self, exponent)
    r = _bool_pow(self, exponent)
    return call(_POW, (self, exponent), {}) if r is None else r


def pow_(self, exponent):
    check_shape_into(self, exponent)
    _check_int_pow(self, exponent)
    _bool_pow(self, exponent)       # (PyTorch's error for bools)
    return call_inplace(_POW, self, (self, exponent), {})


for _n, _f in (("add", add), ("__add__", add), ("__radd__", add), ("sub", sub),
               ("__sub__", sub), ("subtract", sub), ("div", div), ("divide", div),
               ("true_divide", div), ("__truediv__", div), ("pow", pow), ("__pow__", pow)):
    _def(_n, _f)
_def("__rsub__", lambda self, other: check_sub(other, self) or
     call(_RSUB, (self, other), {"alpha": 1}))
_def("__rtruediv__", lambda self, other: self.reciprocal() * other)
_def("__floordiv__", lambda self, other: no_derivative(div(self, other, "floor"),
                                                      "floor_divide"))


def _scalar_operand(self, other):
    """A Python scalar on the left of a tensor, as a 0-d tensor of the promoted dtype."""
    if isinstance(other, Tensor):
        return other
    rt = dtypes.result_type(self, other)
    return tensor(dtypes.wrap_int(other, rt), dtype=rt)     # (300 // uint8: 44 // it)


_def("__rfloordiv__", lambda self, other: no_derivative(
    div(_scalar_operand(self, other), self, "floor"), "floor_divide"))
_def("square", lambda self: call(_POW, (self, 2), {}))
_def("add_", add_)
_def("sub_", sub_)
_def("div_", div_)
_def("pow_", pow_)
Tensor.__iadd__ = Tensor.add_
Tensor.__isub__ = Tensor.sub_
Tensor.__itruediv__ = Tensor.div_
Tensor.__ipow__ = Tensor.pow_
Tensor.__hash__ = lambda self: id(self)


def leaky_relu(self, negative_slope=0.01):
    return self._op("leaky_relu", negative_slope=negative_slope)


def gelu(self, approximate="none"):
    return self._op("gelu", approximate=approximate)


def softplus(self, beta=1, threshold=20):
    return self._op("softplus", beta=beta, threshold=threshold)


def where(self, condition, other):
    check_condition(condition)
    if type(other) is int:      # (as llgrad.where: checked against an integer result's range,
        rt = dtypes.result_type(self, other)    # not wrapped: int8 x.where(m, 300) raises)
        if rt._cat == 1:
            fill_value_fits(other, rt)
    return call(OPS["where"], (condition, self, other), {})


def _addc(op):
    def check(self, tensor1, tensor2, value, name=op):
        ts = [x for x in (self, tensor1, tensor2) if isinstance(x, Tensor)]
        integral = all(x._dtype._cat < 2 for x in ts)
        if op == "addcdiv" and all(     # (tensor1's and tensor2's dtypes alone, as PyTorch)
                isinstance(x, Tensor) and x._dtype._cat < 2 for x in (tensor1, tensor2)):
            raise RuntimeError("Integer division with addcdiv is no longer supported, and in a "
                               "future  release addcdiv will perform a true division of tensor1 "
                               "and tensor2. The historic addcdiv behavior can be implemented "
                               "as (input + value * torch.trunc(tensor1 / tensor2)).to(input."
                               "dtype) for integer inputs and as (input + value * tensor1 / "
                               "tensor2) for float inputs. The future addcdiv behavior is just "
                               "the latter implementation: (input + value * tensor1 / tensor2), "
                               "for all dtypes.")
        if dtypes.result_type(*ts) is dtypes.bool_:
            raise NotImplementedError(f"\"{op}_cpu_out\" not implemented for 'Bool'")
        # (PyTorch reads value in the result's dtype: a float one truncated for integers)
        if isinstance(value, Tensor) and value._data.ndim:    # (a 0-dim one: its number)
            raise TypeError(f"{name}(): argument 'value' must be Number, not Tensor")
        value = python_number(value.item() if isinstance(value, Tensor) else value)
        if integral:
            rt = dtypes.result_type(*ts)
            value = dtypes.wrap_int(int(fill_value_fits(value, rt)), rt)
        return value

    def method(self, tensor1, tensor2, *rest, value=1):
        tensor1, tensor2, value = value_first(op, tensor1, tensor2, rest, value)
        # (a compiled step's dynamic number: an operand, methods_alpha.stand_in_value)
        tensor1, value = stand_in_value(self, tensor1, tensor2, value) or (tensor1, value)
        value = check(self, tensor1, tensor2, value)
        return call(OPS[op], (self, tensor1, tensor2), {"value": value})

    def inplace(self, tensor1, tensor2, *rest, value=1):
        tensor1, tensor2, value = value_first(op + "_", tensor1, tensor2, rest, value)
        tensor1, value = stand_in_value(self, tensor1, tensor2, value) or (tensor1, value)
        value = check(self, tensor1, tensor2, value, op + "_")
        return call_inplace(OPS[op], self, (self, tensor1, tensor2), {"value": value})
    return method, inplace


def _lerp_check(self, end, weight):
    """PyTorch's: self's dtype picks the kernel (none for integers), end must be of it, and
    weight too unless it is 0-dim (then of any dtype, read as a number)."""
    kernel = "tensor" if isinstance(weight, Tensor) else "scalar"
    for name, x in (("end", end), ("weight", weight)):
        if isinstance(x, Tensor) and x._dtype is not self._dtype and (
                name == "end" or x._data.ndim):
            raise RuntimeError(f"expected dtype {dtypes.C_NAMES[self._dtype.name]} for `{name}` but "
                               f"got dtype {dtypes.C_NAMES[x._dtype.name]}")
    if self._dtype._cat < 2:       # (after the dtypes' checks, as PyTorch)
        raise NotImplementedError(f"\"lerp_kernel_{kernel}\" not implemented for "
                                  f"'{scalar_type_name(self._dtype)}'")


def lerp(self, end, weight):
    _lerp_check(self, end, weight)
    return call(OPS["lerp"], (self, end, weight), {})


def lerp_(self, end, weight):
    _lerp_check(self, end, weight)
    return call_inplace(OPS["lerp"], self, (self, end, weight), {})


for _n in ("addcmul", "addcdiv"):
    _out, _inplace = _addc(_n)
    _def(_n, _out)
    _def(_n + "_", _inplace)
_def("lerp", lerp)
_def("lerp_", lerp_)

for _n, _f in (("leaky_relu", leaky_relu), ("gelu", gelu), ("softplus", softplus),
               ("clamp", clamp), ("clip", clamp), ("clamp_", clamp_), ("clip_", clamp_),
               ("where", where)):
    _def(_n, _f)
_def("silu", lambda self: self._op("silu"))
for _n, _f in (("clamp_min", clamp_min), ("clamp_max", clamp_max), ("clamp_min_", clamp_min_),
               ("clamp_max_", clamp_max_)):
    _def(_n, _f)


# ---- copies, casts, fills --------------------------------------------------------------------

def _check_to_args(args, flags):
    """PyTorch's three forms: to([device][, dtype]), to(dtype), to(tensor), each then
    [non_blocking[, copy]]; anything else (two dtypes, a device after a dtype) raises."""
    kinds = ["t" if isinstance(a, Tensor) else "d" if isinstance(a, (dtypes.dtype, type))
             else "b" if isinstance(a, bool) else "v" for a in args]
    head = "".join(kinds[:len(kinds) - len(flags)])
    if len(flags) > 2 or "b" in head or head not in ("", "v", "d", "t", "vd"):
        raise TypeError("to() received an invalid combination of arguments - got (" +
                        ", ".join(type(a).__name__ for a in args) + ")")


def to(self, *args, **kwargs):
    """The tensor cast to a dtype (given, or another tensor's), as torch.Tensor.to; the same
    tensor if nothing changes (copy=True copies). A device other than the CPU raises."""
    dtype = kwargs.get("dtype")
    dtype = None if dtype is None else dtypes.to_dtype(dtype)     # (dtype=float: float64)
    check_device(kwargs.get("device"), "move a tensor to")
    flags = [a for a in args if isinstance(a, bool)]    # (by position: non_blocking, copy)
    _check_to_args(args, flags)
    for a in args:
        if isinstance(a, Tensor):
            dtype = a._dtype
        elif isinstance(a, dtypes.dtype) or a in (float, int, bool):
            dtype = dtypes.to_dtype(a)
        elif isinstance(a, type) and isinstance(getattr(a, "dtype", None), dtypes.dtype):
            dtype = a.dtype         # a typed tensor class: t.type(llgrad.LongTensor)
        elif a is not None and not isinstance(a, bool):
            check_device(a, "move a tensor to")
    copy = kwargs.get("copy", len(flags) > 1 and flags[1])
    if kwargs.get("memory_format") is not None:
        return format_to(self, dtype or self._dtype, kwargs["memory_format"], copy)
    if dtype is None or dtype is self._dtype:
        # PyTorch: to(copy=True) is a _to_copy (ToCopyBackward0), not a clone
        return self._op("to_dtype", dtype=self._dtype.name) if copy else self
    real_cast_warning(self, dtype)
    return self._op("to_dtype", dtype=dtype.name)   # a plain literal, printable in IR


_def("to", to)
for _n, _d in (("float", dtypes.float32), ("double", dtypes.float64), ("half", dtypes.float16),
               ("long", dtypes.int64), ("int", dtypes.int32), ("bool", dtypes.bool_),
               ("bfloat16", dtypes.bfloat16)):     # (bfloat16: raises, no such tensors)
    _def(_n, (lambda d: lambda self, memory_format=None:
              to(self, d, memory_format=memory_format))(_d))
_def("type_as", lambda self, other: to(self, other._dtype))
_def("cpu", lambda self: self)


def _cuda(self, device=None, non_blocking=False, memory_format=None):
    """Raises: llgrad runs on the CPU only."""
    raise NoCudaError("llgrad runs on the CPU only; Tensor.cuda() is not available")


_def("cuda", _cuda)
_def("clone", clone)
_def("contiguous", contiguous)
def fill_(self, value):
    if isinstance(value, Tensor) and value._data.ndim:
        raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with "
                           f"{value._data.ndim} dimensions.")
    if type(value) is SymbolicScalar and self._dtype.is_floating_point:
        # (a compiled function's changing number, a scheduler's lr filled into a tensor lr:
        # its graph value, cast as torch.full casts it, read at each call, not its digits)
        value = call(OPS["full"], (), {"shape": (), "dtype": self._dtype.name,
                                       "value": symbolic_uses.fill_value_fits(value,
                                                                              self._dtype)})
    elif not isinstance(value, Tensor):     # (a tensor's value is copied, unchecked)
        value = fill_value_fits(python_number(value), self._dtype)  # (-1 into uint8: 255)
    return call_inplace(OPS["fill"], self, (self, value), {})


_def("fill_", fill_)
_def("zero_", lambda self: call_inplace(OPS["zero"], self, (self,), {}))


def copy_(self, src, non_blocking=False):
    if not isinstance(src, Tensor):
        if not isinstance(src, (numbers.Number, np.generic)):   # (a number is a 0-d tensor)
            name = "numpy.ndarray" if isinstance(src, np.ndarray) else type(src).__name__
            raise TypeError(f"copy_(): argument 'other' (position 1) must be Tensor, not {name}")
        src = tensor(src)
    _check_inplace(self, (self, src))   # (PyTorch's leaf check comes before the shape's)
    shape = self._data.shape if src._data.shape == self._data.shape else \
        broadcast_shapes(self._data.shape, src._data.shape)
    if shape != self._data.shape:
        raise RuntimeError(f"output with shape {list(self._data.shape)} doesn't match the "
                           f"broadcast shape {list(shape)}")
    return call_inplace(OPS["copy"], self, (self, src), {})


_def("copy_", copy_)


