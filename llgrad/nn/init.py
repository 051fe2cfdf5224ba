"""llgrad.nn.init: PyTorch's parameter initialisations.

Every function fills its tensor in place under no_grad and returns it. Random values come from
llgrad's generator (llgrad.rand / llgrad.randn, or the `generator` passed), so
llgrad.manual_seed makes them reproducible, PyTorch's numbers for a seed."""
import math
import warnings

import numpy as np

from ..runtime import grad_mode
from ..runtime.creation import empty_like, randperm, tensor as _tensor
from ..runtime.dispatch import scalar_type_name
from ..runtime.functions import where
from ..runtime.tensor import Tensor

__all__ = ["calculate_gain", "uniform_", "normal_", "trunc_normal_", "constant_", "ones_",
           "zeros_", "eye_", "dirac_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_",
           "kaiming_normal_", "orthogonal_", "sparse_", "uniform", "normal", "constant",
           "xavier_uniform", "xavier_normal", "kaiming_uniform", "kaiming_normal", "orthogonal",
           "sparse", "eye", "dirac"]


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for a nonlinearity, as torch.nn.init.calculate_gain."""
    linear_fns = ["linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
                  "conv_transpose2d", "conv_transpose3d"]
    if nonlinearity in linear_fns or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            negative_slope = 0.01
        elif (not isinstance(param, bool) and isinstance(param, int)) or isinstance(param, float):
            negative_slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + negative_slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _fill(t, values):
    """Copy `values` (a Tensor or array) into `t` in place, without recording autograd."""
    if not isinstance(values, Tensor):
        values = _tensor(np.asarray(values))
    with grad_mode.no_grad():
        t.copy_(values)
    return t


def _float_only(t, kernel):
    # (PyTorch's Tensor.uniform_ / normal_, which its init functions call, refuse the rest)
    if t.dtype._cat < 2:
        raise NotImplementedError(f'"{kernel}" not implemented for \'{scalar_type_name(t.dtype)}\'')


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    """Fill tensor with U(a, b) samples in place, as torch.nn.init.uniform_ (PyTorch's
    numbers for a seed: Tensor.uniform_ under no_grad)."""
    _float_only(tensor, "check_uniform_bounds")
    with grad_mode.no_grad():
        return tensor.uniform_(a, b, generator=generator)


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    """Fill tensor with N(mean, std^2) samples in place, as torch.nn.init.normal_ (PyTorch's
    numbers for a seed: Tensor.normal_ under no_grad)."""
    _float_only(tensor, "normal_kernel_cpu")
    with grad_mode.no_grad():
        return tensor.normal_(mean, std, generator=generator)


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Normal(mean, std) truncated to [a, b], by PyTorch's rejection sampling (its draws in
    its order: normal draws redrawn where outside [a, b] when the interval holds more than
    0.3 of the mass, else uniform proposals on [a, b] accepted against the density). Its
    buffers are empty_like the tensor, so a transposed view draws into its memory order."""
    def norm_cdf(x):
        return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0

    if (mean < a - 2 * std) or (mean > b + 2 * std):
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. "
                      "The distribution of values may be incorrect.", stacklevel=2)
    _float_only(tensor, "normal_kernel_cpu")
    if tensor.is_meta:          # (no values to redraw)
        return tensor
    with grad_mode.no_grad():
        if norm_cdf((b - mean) / std) - norm_cdf((a - mean) / std) > 0.3:
            lo, hi = tensor.new_tensor(a).item(), tensor.new_tensor(b).item()
            result = tensor.normal_(mean, std, generator=generator)
            while True:
                mask = (result < lo) | (result > hi)
                if not mask.any():
                    break
                fresh = empty_like(result).normal_(mean, std, generator=generator)
                result = where(mask, fresh, result)
            return tensor if result is tensor else tensor.copy_(result)
        log_peak = -0.5 * ((max(a, min(mean, b)) - mean) / std) ** 2
        tensor.uniform_(a, b, generator=generator)
        accept = empty_like(tensor)
        pending = accept.uniform_(generator=generator).log_().gt(_log_density(tensor, mean, std,
                                                                             log_peak))
        result = tensor
        while pending.any():
            candidates = empty_like(tensor).uniform_(a, b, generator=generator)
            result = where(pending, candidates, result)
            pending = where(pending, accept.uniform_(generator=generator).log_().gt(
                _log_density(candidates, mean, std, log_peak)), pending)
        return tensor if result is tensor else tensor.copy_(result)


def _log_density(x, mean, std, log_peak):
    """-0.5 ((x - mean) / std)^2 - log_peak, with PyTorch's in-place steps (its roundings)."""
    return x.clone().sub_(mean).div_(std).pow_(2).mul_(-0.5).sub_(log_peak)


def constant_(tensor, val):
    """Fill tensor with val in place, as torch.nn.init.constant_."""
    with grad_mode.no_grad():
        tensor.fill_(val)
    return tensor


def ones_(tensor):
    """Fill tensor with 1 in place, as torch.nn.init.ones_."""
    return constant_(tensor, 1.0)


def zeros_(tensor):
    """Fill tensor with 0 in place, as torch.nn.init.zeros_."""
    with grad_mode.no_grad():
        tensor.zero_()
    return tensor


def eye_(tensor):
    """Fill a 2-D tensor with the identity in place, as torch.nn.init.eye_."""
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    return _fill(tensor, np.eye(*tensor.shape))


def dirac_(tensor, groups=1):
    """Fill a 3-, 4- or 5-D tensor with the Dirac delta in place, as torch.nn.init.dirac_."""
    dims = tensor.ndim
    if dims not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    sizes = tensor.shape
    if sizes[0] % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    out_chans_per_grp = sizes[0] // groups
    min_dim = min(out_chans_per_grp, sizes[1])
    arr = np.zeros(tuple(sizes))
    centre = tuple(s // 2 for s in sizes[2:])
    for g in range(groups):
        for d in range(min_dim):
            arr[(g * out_chans_per_grp + d, d) + centre] = 1
    return _fill(tensor, arr)


def _calculate_fan_in_and_fan_out(tensor):
    dimensions = tensor.dim()
    if dimensions < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 "
                         "dimensions")
    num_input_fmaps = tensor.size(1)
    num_output_fmaps = tensor.size(0)
    receptive_field_size = 1
    if tensor.dim() > 2:
        for s in tensor.shape[2:]:
            receptive_field_size *= s
    return num_input_fmaps * receptive_field_size, num_output_fmaps * receptive_field_size


def _calculate_correct_fan(tensor, mode):
    mode = mode.lower()
    valid_modes = ["fan_in", "fan_out"]
    if mode not in valid_modes:
        raise ValueError(f"Mode {mode} not supported, please use one of {valid_modes}")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def xavier_uniform_(tensor, gain=1.0, generator=None):
    """Glorot uniform initialisation in place, as torch.nn.init.xavier_uniform_;
    PyTorch's numbers for a seed."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    a = math.sqrt(3.0) * std
    return uniform_(tensor, -a, a, generator)


def xavier_normal_(tensor, gain=1.0, generator=None):
    """Glorot normal initialisation in place, as torch.nn.init.xavier_normal_;
    PyTorch's numbers for a seed."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return normal_(tensor, 0.0, std, generator)


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """He uniform initialisation in place, as torch.nn.init.kaiming_uniform_;
    PyTorch's numbers for a seed."""
    if 0 in tuple(tensor.shape):
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=2)
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    gain = calculate_gain(nonlinearity, a)
    std = gain / math.sqrt(fan)
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """He normal initialisation in place, as torch.nn.init.kaiming_normal_;
    PyTorch's numbers for a seed."""
    if 0 in tuple(tensor.shape):
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=2)
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    gain = calculate_gain(nonlinearity, a)
    std = gain / math.sqrt(fan)
    return normal_(tensor, 0.0, std, generator)


def orthogonal_(tensor, gain=1, generator=None):
    """A (semi-)orthogonal matrix in place (QR of a normal sample in the tensor's dtype), as
    torch.nn.init.orthogonal_."""
    if tensor.ndim < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0 or tensor.is_meta:
        return tensor
    if tensor.dtype.is_complex:     # (PyTorch's fails in torch.sign of the complex R)
        raise NotImplementedError("orthogonal_ is not implemented for complex tensors")
    if tensor.dtype.name == "bfloat16":     # (PyTorch's QR has no bfloat16 kernel)
        raise NotImplementedError("\"geqrf_cpu\" not implemented for 'BFloat16'")
    rows = tensor.size(0)
    cols = tensor.numel() // rows
    flat = tensor.new_empty((rows, cols)).normal_(0, 1, generator=generator).numpy()
    flat = flat.astype(np.float64)
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q = q * np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return _fill(tensor, (gain * q).reshape(tuple(tensor.shape)))


def _reset_weight_and_bias(weight, bias):
    """PyTorch's default for Linear and Conv: kaiming_uniform_(a=sqrt(5)) for the weight,
    uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)) for the bias."""
    kaiming_uniform_(weight, a=math.sqrt(5))
    if bias is not None:
        fan_in, _ = _calculate_fan_in_and_fan_out(weight)
        bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
        uniform_(bias, -bound, bound)


def sparse_(tensor, sparsity, std=0.01, generator=None):
    """A 2-D tensor drawn from N(0, std) with ceil(sparsity * rows) zeros in each column (at
    rows of a randperm of the default generator, as PyTorch's), as torch.nn.init.sparse_."""
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = tensor.shape
    num_zeros = math.ceil(sparsity * rows)
    if tensor.is_meta:          # (no values to draw)
        return tensor
    with grad_mode.no_grad():
        tensor.normal_(0, std, generator=generator)
        v = tensor.detach()         # (bfloat16 has no NumPy dtype: its values as float32)
        values = (v.float() if v.dtype.name == "bfloat16" else v).numpy().copy()
    for col in range(cols):
        values[randperm(rows).numpy()[:num_zeros], col] = 0
    return _fill(tensor, values)


def _make_deprecate(meth):
    new_name = meth.__name__
    old_name = new_name[:-1]

    def deprecated_init(*args, **kwargs):
        warnings.warn(f"`nn.init.{old_name}` is now deprecated in favor of "
                      f"`nn.init.{new_name}`.", FutureWarning, stacklevel=2)
        return meth(*args, **kwargs)
    deprecated_init.__doc__ = f"Deprecated: {new_name}, with PyTorch's FutureWarning."
    deprecated_init.__name__ = old_name
    return deprecated_init


uniform = _make_deprecate(uniform_)
normal = _make_deprecate(normal_)
constant = _make_deprecate(constant_)
eye = _make_deprecate(eye_)
dirac = _make_deprecate(dirac_)
xavier_uniform = _make_deprecate(xavier_uniform_)
xavier_normal = _make_deprecate(xavier_normal_)
kaiming_uniform = _make_deprecate(kaiming_uniform_)
kaiming_normal = _make_deprecate(kaiming_normal_)
orthogonal = _make_deprecate(orthogonal_)
sparse = _make_deprecate(sparse_)


def _no_grad_trunc_normal_(tensor, mean, std, a, b, generator=None):
    """torch.nn.init's private helper behind trunc_normal_ (code copied from timm calls it):
    trunc_normal_ with every parameter given."""
    return trunc_normal_(tensor, mean, std, a, b, generator=generator)
