"""PyTorch's losses beyond nll/cross_entropy/mse/bce-with-logits, and one_hot.

smooth_l1_loss, huber_loss and binary_cross_entropy are ops of the table
(llgrad/ir/ops_losses.py: PyTorch's backward nodes); l1_loss and kl_div are the
compositions PyTorch runs (their nodes are PyTorch's too: MeanBackward0, SubBackward0, ...)."""
import warnings

import numpy as np

from ..ir import OPS
from ..runtime import grad_mode, trace_state
from ..runtime.creation import arange
from ..runtime.dispatch import call
from ..runtime.dtypes import int64, result_type, scalar_type_name
from ..runtime.functions import broadcast_shapes as _public_broadcast_shapes
from ..runtime.shapes import broadcast_shapes
from ..runtime.autocast_cast import autocast_float32

_REDUCTIONS = ("none", "mean", "sum")
_NAMES = {"float32": "Float", "float64": "Double", "float16": "Half", "int64": "Long",
          "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool",
          "bfloat16": "BFloat16"}


def float_kernel(input, target, kernel):
    """PyTorch's pointwise loss kernels (mse, smooth_l1, huber) have no integer or bool
    versions: their NotImplementedError, not an integer loss rounded down."""
    dt = result_type(input, target)
    if dt is not None and not dt.is_floating_point and not dt.is_complex:
        raise NotImplementedError(f'"{kernel}" not implemented for '
                                  f"'{_NAMES.get(dt.name, dt.name)}'")


def legacy_reduction(size_average, reduce, emit=True):
    """PyTorch's _Reduction.legacy_get_string (with its deprecation warning)."""
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    ret = "mean" if size_average and reduce else ("sum" if reduce else "none")
    if emit:
        warnings.warn("size_average and reduce args will be deprecated, please use "
                      f"reduction='{ret}' instead.", stacklevel=3)
    return ret


def _reduction(reduction, size_average=None, reduce=None, allowed=_REDUCTIONS):
    if size_average is not None or reduce is not None:
        return legacy_reduction(size_average, reduce)
    if reduction == "elementwise_mean" and "mean" in allowed:     # (PyTorch 0.4's name)
        warnings.warn("reduction='elementwise_mean' is deprecated. Please use "
                      "reduction='mean' instead.", stacklevel=3)
        return "mean"
    if reduction not in allowed:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return reduction


def _size_warning(input, target):
    if tuple(input.shape) != tuple(target.shape):
        warnings.warn(f"Using a target size ({target.shape}) that is different to the input size "
                      f"({input.shape}). This will likely lead to incorrect results due to "
                      "broadcasting. Please ensure they have the same size.", stacklevel=3)


def _broadcast(input, target):
    shape = broadcast_shapes(tuple(input.shape), tuple(target.shape))
    # (an operand of the shape already stays itself: no expand dispatched)
    return (input if tuple(input.shape) == shape else input.expand(shape),
            target if tuple(target.shape) == shape else target.expand(shape))


def _weighted(loss, weight, reduction, mean, input=None):
    if weight is not None:
        # (PyTorch checks weight against input's size, not the broadcast loss's)
        if tuple(weight.shape) != tuple((loss if input is None else input).shape):
            raise ValueError("Weights and input must have the same size.")
        loss = loss * weight
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    return mean(loss)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """As torch.nn.functional.l1_loss."""
    input, target, weight = autocast_float32(input, target, weight)
    _size_warning(input, target)
    reduction = _reduction(reduction, size_average, reduce)
    x, t = _broadcast(input, target)
    if weight is not None:
        return _weighted((x - t).abs(), weight, reduction, lambda l: l.sum() / weight.sum(), input)
    return _weighted((x - t).abs(), None, reduction, lambda l: l.mean())


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """As torch.nn.functional.smooth_l1_loss."""
    _size_warning(input, target)
    reduction = _reduction(reduction, size_average, reduce)
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    if beta == 0.0:
        return l1_loss(input, target, reduction=reduction)
    float_kernel(input, target, "smooth_l1_cpu")
    x, t = _broadcast(input, target)
    return call(OPS["smooth_l1_loss"], (x, t), {"reduction": reduction, "beta": beta})


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """As torch.nn.functional.huber_loss."""
    _size_warning(input, target)
    reduction = _reduction(reduction)
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    rt = result_type(input, target)
    if rt.is_floating_point and not input.dtype.is_floating_point:    # (written to input's)
        raise RuntimeError(f"result type {_NAMES.get(rt.name, rt.name)} can't be cast to the "
                           f"desired output type {_NAMES.get(input.dtype.name)}")
    if target.dtype != input.dtype:
        # PyTorch's forward writes input's dtype; its backward refuses the mismatch (raised
        # here, when a gradient will be asked for)
        if grad_mode.state.grad_enabled and (input.requires_grad or target.requires_grad):
            raise RuntimeError(f"Found dtype {_NAMES.get(target.dtype.name, target.dtype.name)} "
                               f"but expected {_NAMES.get(input.dtype.name, input.dtype.name)}")
        target = target.to(input.dtype)
    float_kernel(input, target, "huber_cpu")
    x, t = _broadcast(input, target)
    if weight is None:
        return call(OPS["huber_loss"], (x, t), {"reduction": reduction, "delta": delta})
    loss = call(OPS["huber_loss"], (x, t), {"reduction": "none", "delta": delta})
    return _weighted(loss, weight, reduction, lambda l: l.mean(), input)


def weighted_mse_loss(input, target, weight, reduction):
    """mse_loss with weight: PyTorch's composition, (x - t)**2 * weight, its mean divided by
    weight's sum."""
    x, t = _broadcast(input, target)
    return _weighted((x - t).pow(2), weight, reduction, lambda l: l.sum() / weight.sum(), input)


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None,
                         reduction="mean"):
    """As torch.nn.functional.binary_cross_entropy."""
    reduction = _reduction(reduction, size_average, reduce)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Using a target size ({target.shape}) that is different to the input "
                         f"size ({input.shape}) is deprecated. Please ensure they have the same "
                         "size.")
    if weight is not None:
        # (PyTorch's torch.broadcast_shapes of the Sizes: its words)
        weight = weight.expand(_public_broadcast_shapes(target.shape, weight.shape))
    if target.dtype != input.dtype:
        raise RuntimeError(f"Found dtype {_NAMES[target.dtype.name]} but expected "
                           f"{_NAMES[input.dtype.name]}")
    if not input.is_floating_point():   # (ATen dispatches before it checks the range)
        raise NotImplementedError('"binary_cross_entropy" not implemented for '
                                  f"'{scalar_type_name(input.dtype)}'")
    if weight is not None and weight.dtype != input.dtype and not weight.requires_grad:
        weight = weight.to(input.dtype)     # (PyTorch's kernel multiplies by it in place)
    # PyTorch's kernel checks every element (as tensor ops when batched by vmap, or traced:
    # then the check is a value guard, which a compiled call's data must pass)
    for name, t in (("input", input), ("target", target)):
        a = t._data if isinstance(t._data, np.ndarray) and not trace_state.reused() \
            else t.detach()
        if t.numel() and not ((a >= 0) & (a <= 1)).all():
            raise RuntimeError(f"all elements of {name} should be between 0 and 1")
    return call(OPS["binary_cross_entropy"], (input, target, weight), {"reduction": reduction})


def check_kl_dtypes(input, target):
    """ATen's kl_div refuses integer and bool operands (the formula would otherwise compute
    in the promoted float dtype and return a number where PyTorch raises)."""
    for t in (input, target):
        if not (t.dtype.is_floating_point or t.dtype.is_complex):
            raise RuntimeError("kl_div: Integral inputs not supported.")


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """As torch.nn.functional.kl_div."""
    check_kl_dtypes(input, target)
    input, target = autocast_float32(input, target)
    if size_average is not None or reduce is not None:
        reduction = legacy_reduction(size_average, reduce)
    else:
        if reduction == "mean":
            warnings.warn("reduction: 'mean' divides the total loss by both the batch size and "
                          "the support size.'batchmean' divides only by the batch size, and "
                          "aligns with the KL div math definition.'mean' will be changed to "
                          "behave the same as 'batchmean' in the next major release.",
                          stacklevel=2)
        reduction = reduction if reduction == "batchmean" else _reduction(reduction)
    if log_target:
        out = target.exp() * (target - input)
    else:
        out = target.xlogy(target) - target * input     # (PyTorch's: nan gradient at 0)
    if reduction in ("sum", "batchmean"):
        out = out.sum()
    elif reduction == "mean":
        out = out.mean()
    if reduction == "batchmean" and input.dim() != 0:
        out = out / input.shape[0]
    return out


def check_target_shape(input, target, weight=None):
    """nll_loss's checks of a class-index target against input (C) or (N, C, d1, ...), as
    ATen's: the batch sizes, then the target's shape and the weight's, before their dtypes."""
    ishape, tshape = tuple(input.shape), tuple(target.shape)
    if len(ishape) == 1:
        if len(tshape) > 1:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
        _check_target_dtype(target)
        if len(tshape) == 1 and tshape[0] != 1:
            raise ValueError(f"For 1D input, 1D target must have size 1, but got target size: "
                             f"{tshape[0]}")
        check_class_weight(weight, ishape[0])
        return
    if ishape[0] != (tshape[0] if tshape else 0):
        raise ValueError(f"Expected input batch_size ({ishape[0]}) to match target "
                         f"batch_size ({tshape[0] if tshape else 0}).")
    if len(ishape) == 2:
        if len(tshape) > 1:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    elif len(ishape) == 4:
        if len(tshape) != 3:
            raise RuntimeError("only batches of spatial targets supported (3D tensors) but got "
                               f"targets of dimension: {len(tshape)}")
        if tshape != ishape[:1] + ishape[2:]:
            raise RuntimeError(f"size mismatch (got input: {list(ishape)} , target: "
                               f"{list(tshape)}")
    elif tshape[1:] != ishape[2:]:
        raise RuntimeError(f"Expected target size {list(ishape[:1] + ishape[2:])}, got "
                           f"{list(tshape)}")
    _check_target_dtype(target)
    check_class_weight(weight, ishape[1], "" if len(ishape) == 2 else None)


def _check_target_dtype(target):
    if target.dtype.name not in ("int64", "uint8"):
        raise RuntimeError("expected target dtype to be Long or Byte, but got "
                           + _NAMES.get(target.dtype.name, target.dtype.name))


def check_class_weight(weight, c, prefix=""):
    """ATen's check of a per-class weight of C classes (prefix None: nll_loss2d's words)."""
    if weight is None or (weight.dim() == 1 and weight.numel() == c):
        return
    if prefix is None:
        raise RuntimeError("weight tensor should be defined either for all or no classes")
    raise RuntimeError(f"{prefix}weight tensor should be defined either for all {c} classes or "
                       f"no classes but got weight tensor of shape: {list(weight.shape)}")


def one_hot(input, num_classes=-1):
    """As torch.nn.functional.one_hot."""
    if input.dtype != int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    a = input._data
    if num_classes == -1:
        if a.size == 0:
            raise RuntimeError("Can not infer total number of classes from empty tensor.")
        num_classes = int(input.max().item()) + 1        # (a value guard when traced)
    if a.size:
        if trace_state.reused():
            a = input          # (the checks as tensor ops: value guards of the trace)
        if a.min() < 0:
            raise RuntimeError("Class values must be non-negative.")
        if a.max() >= num_classes:
            raise RuntimeError("Class values must be smaller than num_classes.")
    return (input.unsqueeze(-1) == arange(num_classes, device=input.device)).to(int64)
