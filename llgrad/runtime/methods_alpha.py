"""Tensor.add / sub and their in-place forms: PyTorch's checks of alpha, and a number alpha
as add's attribute or a one-element tensor alpha (a learning rate held in a tensor) as an
operand, which a compiled step reads at each call; on float operands either is one fused
multiply-add, as ATen computes them."""
import numpy as np

from ..ir import OPS
from . import dtypes
from .creation_checks import fill_value_fits
from .deprecated_overloads import alpha_first
from .dispatch import call
from .inplace import call_inplace
from .symbolic_operands import within
from .grad_mode import is_grad_enabled
from .symbolic_scalar import SymbolicScalar
from .tensor import Tensor

_ADD, _SUB, _MUL, _ADDCMUL = (OPS[n] for n in ("add", "sub", "mul", "addcmul"))
# dense + sparse, entry by entry as PyTorch's kernel (sparse_add.py installs it)
dense_add_sparse = [None]


def _alpha(self, other, alpha):
    """(other, alpha) for add/sub: a tensor alpha (a learning rate held as a tensor) stays a
    tensor, so a compiled step reads it at each call rather than baking in its value: a 0-d
    one for float operands (the caller takes addcmul, one FMA as ATen's add with a number
    alpha), else other scaled by it (PyTorch reads it as a number: the same values);
    PyTorch's checks of alpha."""
    if type(alpha) is SymbolicScalar and isinstance(other, Tensor) and \
            other._dtype.is_floating_point:
        alpha = _stand_in_alpha(alpha, dtypes.result_type(self, other))
    if alpha.__class__ is int and alpha == 1 and other.__class__ is not int:
        return other, 1         # (the common call: nothing to check or wrap)
    if type(alpha) is bool and dtypes.result_type(self, other) is not dtypes.bool_:
        raise RuntimeError("Boolean alpha only supported for Boolean results.")
    if type(alpha) is float:    # (checked against a float32 / float16 result too)
        rt = dtypes.result_type(self, other)
        if rt._cat < 2:
            raise RuntimeError("For integral input tensors, argument alpha must not be a "
                               "floating point number.")
        fill_value_fits(alpha, rt)
    if isinstance(alpha, Tensor):
        if alpha._data.size != 1:
            raise RuntimeError(f"a Tensor with {alpha._data.size} elements cannot be "
                               "converted to Scalar")
        alpha = alpha.detach().reshape(())
        if isinstance(other, Tensor) and dtypes.result_type(self, other).is_floating_point:
            return other, alpha     # (add / sub take addcmul: one FMA, as a number alpha)
        return call(_MUL, (other, alpha), {}), 1
    if type(alpha) is int:      # (PyTorch: alpha checked, a number other wrapped, into ints)
        rt = dtypes.result_type(self, other)
        alpha = dtypes.wrap_int(fill_value_fits(alpha, rt), rt)
        if type(other) is int and rt._cat == 1:     # (a float other: cast first, then scaled)
            return dtypes.wrap_int(other * alpha, rt), 1
    return other, alpha


def _stand_in_alpha(s, rt):
    """A compiled function's dynamic number as alpha of a floating other (an EMA's
    add_(p, alpha=1 - decay)): its 0-d tensor, read at each call, with PyTorch's check that
    the number fits rt made for this call (past float32's range it raises, as eagerly) and,
    for the calls the trace serves, a guard (a later such number traces again)."""
    fill_value_fits(s.value, rt)
    if rt.name in ("float16", "float32"):
        within(s, float(np.finfo(rt.name).max))
    return s.tensor


def _add_or_sub(name, self, other, alpha):
    """add / sub / add_ / sub_ (name) of self and alpha * other (their arguments read by
    alpha_first, in the caller: its deprecation warning names the user's line): a tensor
    alpha through addcmul (one FMA, as ATen's add with a number alpha)."""
    if other.__class__ is not Tensor and other.__class__.__name__ == "SparseCOOTensor":
        return dense_add_sparse[0](name, self, other, alpha)   # (sparse_add.py's)
    op = _SUB if name.startswith("sub") else _ADD
    if op is _SUB:
        check_sub(self, other)
    other, alpha = _alpha(self, other, alpha)
    inputs, attrs = (self, other), {"alpha": alpha}
    if isinstance(alpha, Tensor):
        op, inputs, attrs = _ADDCMUL, (self, other, alpha), {"value": -1 if op is _SUB else 1}
    if name.endswith("_"):
        return call_inplace(op, self, inputs, attrs)
    return call(op, inputs, attrs)


def add(self, other, alpha=1):
    """self + alpha * other, as torch.Tensor.add. alpha may be a one-element tensor (a
    learning rate held in a tensor): a compiled step then reads it at each call instead of
    baking its value in (the values are PyTorch's)."""
    if other.__class__ is Tensor and alpha.__class__ is int and alpha == 1:
        return call(_ADD, (self, other), {"alpha": 1})  # (_add_or_sub's call, at once)
    return _add_or_sub("add", self, *alpha_first("add", other, alpha))


def check_sub(a, b):
    """PyTorch's refusal of - on bool operands (a Python bool is a bool tensor there)."""
    na = (a._dtype is dtypes.bool_) if isinstance(a, Tensor) else isinstance(a, bool)
    nb = (b._dtype is dtypes.bool_) if isinstance(b, Tensor) else isinstance(b, bool)
    if na and nb:
        raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not "
                           "supported. Use the `^` or `logical_xor()` operator instead.")
    if na or nb:
        raise RuntimeError("Subtraction, the `-` operator, with a bool tensor is not "
                           "supported. If you are trying to invert a mask, use the `~` or "
                           "`logical_not()` operator instead.")


def sub(self, other, alpha=1):
    """self - alpha * other, as torch.Tensor.sub; alpha as add's."""
    if other.__class__ is Tensor and alpha.__class__ is int and alpha == 1:
        check_sub(self, other)
        return call(_SUB, (self, other), {"alpha": 1})  # (_add_or_sub's call, at once)
    return _add_or_sub("sub", self, *alpha_first("sub", other, alpha))


def add_(self, other, alpha=1):
    """In-place add, as torch.Tensor.add_; alpha as add's (a number or a one-element tensor)."""
    return _add_or_sub("add_", self, *alpha_first("add_", other, alpha))


def sub_(self, other, alpha=1):
    """In-place sub, as torch.Tensor.sub_; alpha as add's (a number or a one-element tensor)."""
    return _add_or_sub("sub_", self, *alpha_first("sub_", other, alpha))


def stand_in_value(self, tensor1, tensor2, value):
    """addcmul / addcdiv's value when it is a compiled function's dynamic number on float32 or
    float64 operands of one dtype, outside autograd (a hand-written AdamW's
    `p.addcdiv_(exp_avg, denom, value=-step_size)`, step_size made from the step count):
    tensor1 scaled by its 0-d tensor in that dtype (PyTorch's kernel computes value * tensor1
    first: the same roundings), so the call is the op with value 1, read at each call.
    -> (tensor1, 1), or None (the number escapes, as an attribute would: its value read)."""
    ts = (self, tensor1, tensor2)
    if type(value) is not SymbolicScalar or not all(isinstance(t, Tensor) for t in ts) or \
            len({t._dtype for t in ts}) != 1 or \
            self._dtype not in (dtypes.float32, dtypes.float64) or \
            (is_grad_enabled() and any(t.requires_grad for t in ts)):
        return None     # (a gradient through value's product would round otherwise)
    v = _stand_in_alpha(value, self._dtype)
    return call(_MUL, (tensor1, v.to(self._dtype)), {}), 1
