"""PyTorch's activation functions beyond relu/gelu/silu: ops of the table where PyTorch has
a backward node of their own (elu, selu, celu, hardtanh, relu6, logsigmoid, glu, mish,
hardswish, hardsigmoid, threshold: llgrad/ir/ops_activations.py) and PyTorch's own
compositions for the rest (softsign, tanhshrink, softmin, hardshrink, softshrink,
prelu)."""
import warnings

from ..ir import OPS
from ..runtime.dispatch import call, scalar_type_name
from ..runtime.inplace import call_inplace
from ..runtime.node_names import torch_node
from .functional_loss import _NAMES
from ..runtime.autocast_cast import autocast_lower
from ..runtime.creation_checks import fill_value_fits

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def floating_only(input, kernel):
    """PyTorch's activation kernels refuse integer and bool inputs (no promotion)."""
    if not input.is_floating_point() and not input.is_complex():
        name = input.dtype.name
        raise NotImplementedError(f'"{kernel}" not implemented for '
                                  f"'{_NAMES.get(name, name)}'")


def _apply(name, input, inplace, attrs, inplace_op=None):
    if name not in ("hardtanh", "threshold"):       # (these two take integers)
        floating_only(input, "elu_cpu" if name == "celu" else name + "_cpu")
    if name == "threshold" and input.dtype.name == "bool":
        raise NotImplementedError("\"threshold_cpu\" not implemented for 'Bool'")
    if name == "hardtanh":      # (PyTorch's hardtanh_out: not bool, uint8's limits not < 0)
        if input.dtype.name == "bool":
            raise RuntimeError("Bool inputs not supported for hardtanh")
        if input.dtype.name == "uint8" and min(int(attrs["min_val"]), int(attrs["max_val"])) < 0:
            raise RuntimeError("cannot do hardtanh on an unsigned type with negative limits")
        attrs = {k: _kernel_scalar(v, input) for k, v in attrs.items()}
    if inplace:
        return call_inplace(OPS[inplace_op or name], input, (input,), attrs)
    return call(OPS[name], (input,), attrs)


def elu(input, alpha=1.0, inplace=False):
    """As torch.nn.functional.elu."""
    return _apply("elu", input, inplace, {"alpha": alpha, "scale": 1.0, "input_scale": 1.0},
                  "elu_")


def selu(input, inplace=False):
    """As torch.nn.functional.selu."""
    return _apply("elu", input, inplace,
                  {"alpha": _SELU_ALPHA, "scale": _SELU_SCALE, "input_scale": 1.0}, "elu_")


def celu(input, alpha=1.0, inplace=False):
    """As torch.nn.functional.celu."""
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError: alpha cannot be 0 for CELU")
    return _apply("celu", input, inplace,
                  {"alpha": alpha, "scale": 1.0, "input_scale": 1.0 / alpha}, "celu_")


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    """As torch.nn.functional.hardtanh."""
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    return _apply("hardtanh", input, inplace, {"min_val": min_val, "max_val": max_val})


def relu6(input, inplace=False):
    """As torch.nn.functional.relu6."""
    return hardtanh(input, 0.0, 6.0, inplace)


def logsigmoid(input):
    """As torch.nn.functional.logsigmoid."""
    floating_only(input, "log_sigmoid_cpu")
    return call(OPS["logsigmoid"], (input,), {})


def mish(input, inplace=False):
    """As torch.nn.functional.mish."""
    return _apply("mish", input, inplace, {})


def hardswish(input, inplace=False):
    """As torch.nn.functional.hardswish."""
    return _apply("hardswish", input, inplace, {})


def hardsigmoid(input, inplace=False):
    """As torch.nn.functional.hardsigmoid."""
    return _apply("hardsigmoid", input, inplace, {})


def threshold(input, threshold, value, inplace=False):
    """As torch.nn.functional.threshold."""
    attrs = {"threshold": _kernel_scalar(threshold, input), "value": _kernel_scalar(value, input)}
    return _apply("threshold", input, inplace, attrs, "threshold_")


def _kernel_scalar(v, input):
    """A Python number v as PyTorch's kernel reads it: converted to input's dtype, with its
    overflow error (a negative int into uint8 wraps), a float truncated for an integer dtype
    (threshold -2.5 of an int8 tensor is -2, -3 of a uint8 one 253)."""
    if type(v) not in (int, float) or input.dtype.name == "bool":
        return v
    v = fill_value_fits(v, input.dtype)
    return int(v) if not input.is_floating_point() and not input.is_complex() else v


def glu(input, dim=-1):
    """As torch.nn.functional.glu."""
    nd = input.dim()
    if nd == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    if not -nd <= dim < nd:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-nd}, {nd - 1}],"
                         f" but got {dim})")
    dim %= nd
    floating_only(input, "glu_cpu")
    n = input.shape[dim]
    if n % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {dim} is size {n}")
    return call(OPS["glu"], (input,), {"dim": dim})


def softsign(input):
    """As torch.nn.functional.softsign."""
    return input / (input.abs() + 1)


def tanhshrink(input):
    """As torch.nn.functional.tanhshrink."""
    return input - input.tanh()


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    """As torch.nn.functional.softmin."""
    if dim is None:
        warnings.warn("Implicit dimension choice for softmin has been deprecated. Change the "
                      "call to include dim=X as an argument.", UserWarning, stacklevel=2)
        dim = 0 if input.dim() in (0, 1, 3) else 1
    return (-input).softmax(dim, dtype)


@torch_node("HardshrinkBackward0")
def hardshrink(input, lambd=0.5):
    """As torch.nn.functional.hardshrink."""
    floating_only(input, "hardshrink_cpu")
    # (where, not masked_fill: the result keeps input's layout, as PyTorch's kernel's)
    return input.where(~((input >= -lambd) & (input <= lambd)), 0)    # (NaN kept)


@torch_node("SoftshrinkBackward0")
def softshrink(input, lambd=0.5):
    """As torch.nn.functional.softshrink."""
    floating_only(input, "softshrink_check")
    if lambd < 0:
        raise RuntimeError(f"lambda must be greater or equal to 0, but found to be {lambd}.")
    if input.dtype.name == "bfloat16":     # (PyTorch's kernel: in float32, lambd unrounded)
        return softshrink(input.float(), lambd).to(input.dtype)
    return (input - input.sign() * lambd).where(~((input >= -lambd) & (input <= lambd)), 0)


@torch_node("PreluKernelBackward0")
def prelu(input, weight):
    """As torch.nn.functional.prelu."""
    input, weight = autocast_lower(input, weight)
    if input.dtype != weight.dtype:
        raise RuntimeError(f"prelu: Type promoting not supported. Got "
                           f"{scalar_type_name(input.dtype)} and {scalar_type_name(weight.dtype)}")
    if not input.is_floating_point():
        raise NotImplementedError(f"\"prelu_cpu\" not implemented for "
                                  f"'{scalar_type_name(input.dtype)}'")
    n = weight.numel()
    nd = input.dim()
    if n != 1:
        if nd == 0:
            raise RuntimeError("Not allow zero-dim input tensor.")
        c = input.shape[1] if nd >= 2 else 1
        if n != c:
            raise RuntimeError(f"Mismatch of parameter numbers and input channel size. Found "
                               f"parameter numbers = {n} and channel size = {c}.")
    if weight.dim() > 1:            # (else its elements would be read as the channels')
        raise RuntimeError(f"prelu: Expected `weight` to be a scalar or 1D tensor, but got: "
                           f"ndim = {weight.dim()}")
    if n != 1:
        w = weight.reshape((c,) + (1,) * (nd - 2)) if nd >= 2 else weight.reshape(c)
    else:
        w = weight.reshape(())
    return input.where(input > 0, w * input)
