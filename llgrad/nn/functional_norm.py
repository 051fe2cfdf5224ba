"""F.group_norm (an op of the table: NativeGroupNormBackward0, lowered as layer_norm's
primitives over the groups), and F.instance_norm and F.rms_norm, the compositions PyTorch
runs (instance_norm: batch_norm over (1, N*C, ...) viewed back; rms_norm: x times the
reciprocal root mean square, times the weight)."""
import warnings

import numpy as np

from ..ir import OPS
from ..runtime import grad_mode
from ..runtime.dispatch import call, scalar_type_name
from ..runtime.dtypes import C_NAMES, bfloat16, float16
from ..runtime.memory_formats import suggested
from ..runtime.result_format import in_suggested_format


def _shape(t):
    return list(t.shape)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """As torch.nn.functional.group_norm."""
    if input.dim() < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received "
                           f"{input.dim()}")
    n, c = input.shape[:2]
    size = [n * c // num_groups, num_groups] + list(input.shape[2:])
    if int(np.prod([size[0]] + size[2:])) == 1:
        raise ValueError(f"Expected more than 1 value per channel when training, got input size "
                         f"{size}")
    if c % num_groups:
        raise RuntimeError(f"Expected number of channels in input to be divisible by num_groups, "
                           f"but got input of shape {_shape(input)} and num_groups={num_groups}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and (t.dim() != 1 or t.shape[0] != c):
            raise RuntimeError(f"Expected {name} to be a vector of size equal to the number of "
                               f"channels in input, but got {name} of shape {_shape(t)} and "
                               f"input of shape {_shape(input)}")
    check_mixed_dtype(input, weight, bias)
    check_floating(input, "GroupNormKernelImpl")
    return in_suggested_format(call(OPS["group_norm"], (input, weight, bias),
                                    {"num_groups": num_groups, "eps": eps}), input)


def check_floating(input, kernel):
    """The CPU kernels' dtype dispatch: floating inputs only."""
    if not input.is_floating_point():
        raise NotImplementedError(f'"{kernel}" not implemented for '
                                  f"'{scalar_type_name(input.dtype)}'")


def empty_batch_norm(input, weight, bias):
    """ATen's batch norm of an empty input: its result still depends on weight and bias
    (their first channel), and the running statistics stay as they are."""
    out = input.clone()
    out = out * weight[0] if weight is not None else out
    return out + bias[0] if bias is not None else out


_TYPE = {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16"}


def check_norm_ndim(normalized_shape):
    """PyTorch's first check of layer_norm and rms_norm: an empty normalized_shape would
    otherwise normalise over no dims (mean of one element: all zeros, silently)."""
    if not len(normalized_shape):
        raise RuntimeError("Expected normalized_shape to be at least 1-dimensional, i.e., "
                           "containing at least one element, but got normalized_shape = []")


def check_norm_shapes(normalized_shape, weight, bias):
    """layer_norm's weight and bias have normalized_shape exactly (not broadcast), as
    PyTorch checks before the input's shape."""
    check_norm_ndim(normalized_shape)
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != tuple(normalized_shape):
            raise RuntimeError(f"Expected {name} to be of same shape as normalized_shape, but got "
                               f"{name} of shape {list(t.shape)} and normalized_shape = "
                               f"{list(normalized_shape)}")


def check_mixed_dtype(input, *params):
    """ATen's CPU norms: the parameters share one dtype, the input's (or float32 for a
    float16 / bfloat16 input); no promotion."""
    ps = [p for p in params if p is not None]
    if not ps:
        return
    first = ps[0].dtype
    for p in ps[1:]:
        if p.dtype != first:
            raise RuntimeError(f"expected scalar type {_TYPE.get(first.name, first.name)} but "
                               f"found {_TYPE.get(p.dtype.name, p.dtype.name)}")
    if first == input.dtype:
        return
    if first.name != "float32":
        raise RuntimeError("mixed dtype (CPU): expect parameter to have scalar type of Float")
    if input.dtype.name not in ("float16", "bfloat16"):
        raise RuntimeError("mixed dtype (CPU): all inputs must share same datatype.")


def check_batch_norm_args(input, weight, bias, running_mean, running_var):
    """ATen's batch_norm: each given parameter and statistic has one value per channel,
    then check_mixed_dtype."""
    c = input.shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var),
                    ("weight", weight), ("bias", bias)):
        if t is not None and t.numel() != c:
            raise RuntimeError(f"{name} should contain {c} elements not {t.numel()}")
    check_floating(input, "batch_norm")
    check_mixed_dtype(input, weight, bias, running_mean, running_var)


def _per_instance(t, b):
    """t (C,) repeated for each of b instances: (b * C,)."""
    return None if t is None else t.unsqueeze(0).expand(b, t.shape[0]).reshape(-1)


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats=True, momentum=0.1, eps=1e-5):
    """As torch.nn.functional.instance_norm."""
    if use_input_stats and int(np.prod(input.shape[2:])) == 1:
        raise ValueError(f"Expected more than 1 spatial element when training, got input size "
                         f"{input.shape}")
    if not use_input_stats and (running_mean is None or running_var is None):
        raise RuntimeError("Expected running_mean and running_var to be defined when "
                           "use_input_stats is false")
    check_floating(input, "batch_norm")
    check_mixed_dtype(input, weight, bias)      # (PyTorch's: the statistics may differ)
    b, c = input.shape[:2]
    x = input.contiguous().view((1, b * c) + tuple(input.shape[2:]))
    w, bb = _per_instance(weight, b), _per_instance(bias, b)
    if not use_input_stats:
        out = call(OPS["batch_norm"], (x, w, bb, _per_instance(running_mean, b),
                                       _per_instance(running_var, b)),
                   {"training": False, "eps": eps})
        return out.view(tuple(input.shape))
    # batch_norm's update of each instance's statistics, averaged over the batch
    with grad_mode.no_grad():
        dims = tuple(range(2, input.dim()))
        xd = input.detach()
        for stat, new in ((running_mean, lambda: xd.mean(dims)),
                          (running_var, lambda: xd.var(dims, correction=1))):
            if stat is not None:
                stat.mul_(1 - momentum).add_(new().to(stat.dtype).mean(0), alpha=momentum)
    out = call(OPS["batch_norm"], (x, w, bb, None, None), {"training": True, "eps": eps})
    return out.view(tuple(input.shape))


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """As torch.nn.functional.rms_norm."""
    if isinstance(normalized_shape, int):
        raise TypeError("rms_norm(): argument 'normalized_shape' (position 2) must be tuple of "
                        "ints, not int")
    ns = tuple(normalized_shape)
    check_norm_ndim(ns)
    k = len(ns)
    if tuple(input.shape[input.dim() - k:]) != ns or k > input.dim():
        raise RuntimeError(f"Given normalized_shape={list(ns)}, expected input with shape "
                           f"[*{', '.join(map(str, ns))}], but got input of size"
                           f"{_shape(input)}")
    if weight is not None and tuple(weight.shape) != ns:
        raise RuntimeError(f"Expected weight to be of same shape as normalized_shape, but got "
                           f"weight of shape {_shape(weight)} and normalized_shape = {list(ns)}")
    check_floating(input, "rms_norm")
    if weight is not None and weight.dtype != input.dtype:
        _warn_once_mismatch(input, weight)
    # PyTorch's composite: half upcast to float, the weight's product in the promoted type,
    # the result cast back to the input's type (ToCopyBackward0)
    x = input.float() if input.dtype in (float16, bfloat16) else input
    if eps is None:
        eps = float(np.finfo(x.dtype.name).eps)
    dims = tuple(range(input.dim() - k, input.dim()))
    out = x * (x.pow(2).mean(dims, keepdim=True) + eps).rsqrt()
    if weight is not None:
        out = out * weight
    out = out if out.dtype == input.dtype else out.to(input.dtype)
    # (PyTorch's composite ends with a copy in input's suggested format: a transposed
    # input's result is row-major, CloneBackward0)
    return out.contiguous(memory_format=_FORMATS[suggested(input)])


_FORMATS = {"contiguous": "contiguous_format", "channels_last": "channels_last",
            "channels_last_3d": "channels_last_3d"}


_MISMATCH_WARNED = []


def _warn_once_mismatch(input, weight):
    """PyTorch's TORCH_WARN_ONCE of rms_norm's input and weight of two dtypes."""
    if not _MISMATCH_WARNED:
        _MISMATCH_WARNED.append(True)
        warnings.warn(f"Mismatch dtype between input and weight: input dtype = "
                      f"{C_NAMES[input.dtype.name]}, weight dtype = {C_NAMES[weight.dtype.name]}, "
                      "Cannot dispatch to fused implementation.", stacklevel=3)
