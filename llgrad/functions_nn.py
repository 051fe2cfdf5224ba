"""The torch.* functions that are torch.nn.functional's under PyTorch's other names and
argument orders (torch.conv2d, torch.layer_norm, torch.batch_norm(input, weight, bias,
running_mean, running_var, ...), torch.embedding(weight, indices), torch.dropout(input, p,
train), ...), and llgrad.trace: the tracer's trace(fn, *args) and torch.trace(matrix) under
one name. They live on top of llgrad.nn, so here rather than in llgrad/runtime."""
from typing import Any

from .nn import functional as F
from .nn.functional_grid import _affine_grid_generator
from .nn.functional_loss import check_kl_dtypes
from .nn.functional_noise import rrelu_out_of_place
from .runtime.functions_linalg import trace as _matrix_trace
from .runtime.result_format import formatted
from .runtime.tensor import Tensor
from .tracer import trace as _trace_fn

__all__ = ["conv1d", "conv2d", "conv_transpose1d", "conv_transpose2d", "layer_norm",
           "group_norm", "batch_norm", "instance_norm", "rms_norm", "dropout", "dropout_",
           "embedding", "prelu", "cosine_similarity", "pairwise_distance", "pixel_shuffle",
           "pixel_unshuffle", "channel_shuffle", "native_channel_shuffle", "bilinear",
           "hardshrink", "threshold", "threshold_", "celu", "celu_", "selu", "selu_",
           "max_pool2d", "avg_pool1d", "adaptive_avg_pool1d", "adaptive_max_pool1d",
           "constant_pad_nd", "binary_cross_entropy_with_logits", "kl_div", "pdist", "rrelu",
           "rrelu_", "affine_grid_generator", "grid_sampler", "grid_sampler_2d",
           "grid_sampler_3d", "embedding_renorm_", "trace"]

_REDUCTION = {0: "none", 1: "mean", 2: "sum"}      # (at::Reduction, torch.*'s int argument)


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """As torch.conv1d (torch.nn.functional.conv1d)."""
    return F.conv1d(input, weight, bias, stride, padding, dilation, groups)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """As torch.conv2d (torch.nn.functional.conv2d)."""
    return F.conv2d(input, weight, bias, stride, padding, dilation, groups)


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """As torch.conv_transpose1d (torch.nn.functional.conv_transpose1d)."""
    return F.conv_transpose1d(input, weight, bias, stride, padding, output_padding, groups,
                              dilation)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """As torch.conv_transpose2d (torch.nn.functional.conv_transpose2d)."""
    return F.conv_transpose2d(input, weight, bias, stride, padding, output_padding, groups,
                              dilation)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-05, cudnn_enable=True):
    """As torch.layer_norm (cudnn_enable is ignored)."""
    return F.layer_norm(input, normalized_shape, weight, bias, eps)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-05, cudnn_enabled=True):
    """As torch.group_norm (cudnn_enabled is ignored)."""
    return F.group_norm(input, num_groups, weight, bias, eps)


def batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps,
               cudnn_enabled):
    """As torch.batch_norm: F.batch_norm less its checks of eps, with the ATen argument
    order (weight and bias before the running statistics); channels_last where the input
    is, as PyTorch's."""
    return formatted(lambda: F.aten_batch_norm(input, running_mean, running_var, weight, bias,
                                               training, momentum, eps), input)


def instance_norm(input, weight, bias, running_mean, running_var, use_input_stats, momentum,
                  eps, cudnn_enabled):
    """As torch.instance_norm: F.instance_norm with the ATen argument order."""
    return F.instance_norm(input, running_mean, running_var, weight, bias, use_input_stats,
                           momentum, eps)


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """As torch.rms_norm (torch.nn.functional.rms_norm)."""
    return F.rms_norm(input, normalized_shape, weight, eps)


def dropout(input, p, train):
    """As torch.dropout(input, p, train) (F.dropout; llgrad's random stream)."""
    return F.dropout(input, p, train)


def dropout_(input, p, train):
    """As torch.dropout_: in-place F.dropout."""
    return F.dropout(input, p, train, inplace=True)


def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    """As torch.embedding(weight, indices, ...): F.embedding with the ATen argument order;
    padding_idx -1 means none (the row of a padding_idx >= 0 gets no gradient)."""
    return F.embedding(indices, weight, None if padding_idx is None or padding_idx < 0
                       else padding_idx, scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)


def prelu(input, weight):
    """As torch.prelu (torch.nn.functional.prelu)."""
    return F.prelu(input, weight)


def cosine_similarity(x1, x2, dim=1, eps=1e-08):
    """As torch.cosine_similarity (torch.nn.functional.cosine_similarity)."""
    return F.cosine_similarity(x1, x2, dim, eps)


def pairwise_distance(x1, x2, p=2.0, eps=1e-06, keepdim=False):
    """As torch.pairwise_distance (torch.nn.functional.pairwise_distance)."""
    return F.pairwise_distance(x1, x2, p, eps, keepdim)


def pixel_shuffle(input, upscale_factor):
    """As torch.pixel_shuffle (torch.nn.functional.pixel_shuffle)."""
    return F.pixel_shuffle(input, upscale_factor)


def pixel_unshuffle(input, downscale_factor):
    """As torch.pixel_unshuffle (torch.nn.functional.pixel_unshuffle)."""
    return F.pixel_unshuffle(input, downscale_factor)


def channel_shuffle(input, groups):
    """As torch.channel_shuffle (torch.nn.functional.channel_shuffle)."""
    return F.channel_shuffle(input, groups)


native_channel_shuffle = channel_shuffle


def bilinear(input1, input2, weight, bias=None):
    """As torch.bilinear (torch.nn.functional.bilinear)."""
    return F.bilinear(input1, input2, weight, bias)


def hardshrink(input, lambd=0.5):
    """As torch.hardshrink (torch.nn.functional.hardshrink)."""
    return F.hardshrink(input, lambd)


def threshold(input, threshold, value):
    """As torch.threshold (torch.nn.functional.threshold)."""
    return F.threshold(input, threshold, value)


def threshold_(input, threshold, value):
    """As torch.threshold_ (torch.nn.functional.threshold_)."""
    return F.threshold_(input, threshold, value)


def celu(input, alpha=1.0):
    """As torch.celu (torch.nn.functional.celu)."""
    return F.celu(input, alpha)


def celu_(input, alpha=1.0):
    """As torch.celu_ (torch.nn.functional.celu_)."""
    return F.celu_(input, alpha)


def selu(input):
    """As torch.selu (torch.nn.functional.selu)."""
    return F.selu(input)


def selu_(input):
    """As torch.selu_ (torch.nn.functional.selu_)."""
    return F.selu_(input)


def max_pool2d(input, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """As torch.max_pool2d (F.max_pool2d; an empty stride is the kernel size)."""
    return F.max_pool2d(input, kernel_size, stride if stride not in ((), []) else None, padding,
                        dilation, ceil_mode)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True):
    """As torch.avg_pool1d (torch.nn.functional.avg_pool1d)."""
    return F.avg_pool1d(input, kernel_size, stride, padding, ceil_mode, count_include_pad)


def adaptive_avg_pool1d(input, output_size):
    """As torch.adaptive_avg_pool1d (torch.nn.functional.adaptive_avg_pool1d)."""
    return F.adaptive_avg_pool1d(input, output_size)


def adaptive_max_pool1d(input, output_size):
    """As torch.adaptive_max_pool1d: (values, indices), as ATen returns them."""
    return F.adaptive_max_pool1d(input, output_size, return_indices=True)


def constant_pad_nd(input, pad, value=0):
    """As torch.constant_pad_nd (F.pad with mode 'constant')."""
    return F.pad(input, list(pad), "constant", value)


def binary_cross_entropy_with_logits(input, target, weight=None, pos_weight=None, reduction=1):
    """As torch.binary_cross_entropy_with_logits: F's, with ATen's reduction number (0 none,
    1 mean, 2 sum)."""
    return F.binary_cross_entropy_with_logits(input, target, weight,
                                              reduction=_REDUCTION[int(reduction)],
                                              pos_weight=pos_weight)


def kl_div(input, target, reduction=0, *, log_target=False):
    """As torch.kl_div: F.kl_div's pointwise loss with ATen's reduction number (1 mean, 2 sum,
    any other none: as torch 2.13 runs it, whose default is none) and no warning."""
    check_kl_dtypes(input, target)
    if log_target:
        out = target.exp() * (target - input)
    else:
        out = target.xlogy(target) - target * input     # (PyTorch's kl_div)
    reduction = int(reduction)
    if reduction == 1:
        return out.mean()
    return out.sum() if reduction == 2 else out


def pdist(input, p=2):
    """As torch.pdist (torch.nn.functional.pdist)."""
    return F.pdist(input, p)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):
    """As torch.rrelu (torch.nn.functional.rrelu; the slopes drawn from generator when one is
    given)."""
    return rrelu_out_of_place(input, lower, upper, training, generator)


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):
    """As torch.rrelu_ (torch.nn.functional.rrelu_)."""
    return F.rrelu_(input, lower, upper, training, generator)


def affine_grid_generator(theta, size, align_corners):
    """As torch.affine_grid_generator: F.affine_grid without its checks and warnings."""
    return _affine_grid_generator(theta, [int(v) for v in size], bool(align_corners))


def grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners):
    """As torch.grid_sampler: F.grid_sample with ATen's mode numbers (interpolation 0 bilinear,
    1 nearest, 2 bicubic; padding 0 zeros, 1 border, 2 reflection)."""
    return F.grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners)


def _grid_sampler_nd(ndim, input, grid, interpolation_mode, padding_mode, align_corners):
    if input.dim() != ndim or grid.dim() != ndim:
        raise RuntimeError(f"grid_sampler(): expected {ndim}D input and grid with same number "
                           f"of dimensions, but got input with sizes {list(input.shape)} and "
                           f"grid with sizes {list(grid.shape)}")
    return F.grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners)


def grid_sampler_2d(input, grid, interpolation_mode, padding_mode, align_corners):
    """As torch.grid_sampler_2d: grid_sampler of a 4-D input."""
    return _grid_sampler_nd(4, input, grid, interpolation_mode, padding_mode, align_corners)


def grid_sampler_3d(input, grid, interpolation_mode, padding_mode, align_corners):
    """As torch.grid_sampler_3d: grid_sampler of a 5-D input."""
    return _grid_sampler_nd(5, input, grid, interpolation_mode, padding_mode, align_corners)


def embedding_renorm_(input, indices, max_norm, norm_type):
    """As torch.embedding_renorm_: the rows of input (the weight) that indices use, rescaled in
    place to norm at most max_norm; returns input."""
    return F.embedding_renorm_(input, indices, max_norm, norm_type)


def trace(fn_or_input: Any, *args: Any, **kwargs: Any) -> Any:
    """Two functions under PyTorch's one name: with a tensor, torch.trace (the sum of a
    matrix's diagonal); with a function, llgrad's tracer: run fn once on args, recording
    every op into a verified Graph (llgrad.tracer.trace)."""
    if isinstance(fn_or_input, Tensor):
        return _matrix_trace(fn_or_input, *args, **kwargs)
    return _trace_fn(fn_or_input, *args, **kwargs)


Tensor.hardshrink = lambda self, lambd=0.5: F.hardshrink(self, lambd)
Tensor.hardshrink.__doc__ = "As torch.Tensor.hardshrink."
Tensor.prelu = lambda self, weight: F.prelu(self, weight)
Tensor.prelu.__doc__ = "As torch.Tensor.prelu."
