"""Power-average pooling (lp_pool1d/2d), max unpooling (max_unpool1d/2d) and local response
normalisation, as the compositions torch.nn.functional runs, with its checks and messages.

lp_pool and local_response_norm are PyTorch's own Python compositions over avg_pool (the
3-D average pool of local_response_norm is the 2-D one over the flattened spatial dims: the
same windows, along the channels only). max_unpool writes each value at its index into a
zero output with scatter (ATen's max_unpooling: the last write wins for a repeated index),
whose gradient reads the output's gradient back at the indices (gather), as ATen's backward
does."""
import math

import numpy as np

from ..runtime.dtypes import int64
from ..runtime.node_names import rename
from .functional_conv import _pair, max_pool2d
from .functional_extra import max_pool1d
from .functional_loss import _NAMES
from .functional_pad import pad
from .functional_pool import avg_pool1d, avg_pool2d
from ..runtime.autocast_cast import autocast_float32, float32_list

__all__ = ["lp_pool1d", "lp_pool2d", "max_unpool1d", "max_unpool2d", "local_response_norm"]


def _single(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


# ---- power-average pooling -----------------------------------------------------------------

def _lp_pool(max_pool, avg_pool, window, input, norm_type, kernel_size, stride, ceil_mode):
    """(sum over each window of x^p)^(1/p) as PyTorch computes it: the average pool of x^p
    times the window's size; p = +-inf the max pool of |x| (its negative's, for -inf)."""
    if isinstance(norm_type, (int, float)):
        if norm_type == math.inf:
            return max_pool(input.abs(), kernel_size, stride, 0, 1, ceil_mode)
        if norm_type == -math.inf:
            return -max_pool(-input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    if stride is not None:
        out = avg_pool(input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    else:
        out = avg_pool(input.pow(norm_type), kernel_size, padding=0, ceil_mode=ceil_mode)
    # sign(out) * relu(|out|): PyTorch's guard against negative sums of odd powers
    return (out.sign() * out.abs().relu()).mul(window).pow(1.0 / norm_type)


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """As torch.nn.functional.lp_pool1d: (sum over each window of x^p)^(1/p); p = inf is the
    maximum of |x|."""
    return _lp_pool(max_pool1d, avg_pool1d, kernel_size, input, norm_type, kernel_size,
                    stride, ceil_mode)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """As torch.nn.functional.lp_pool2d: (sum over each window of x^p)^(1/p); p = inf is the
    maximum of |x|."""
    kw, kh = _pair(kernel_size)
    return _lp_pool(max_pool2d, avg_pool2d, kw * kh, input, norm_type, kernel_size, stride,
                    ceil_mode)


# ---- max unpooling -------------------------------------------------------------------------

def _unpool_output_size(input, kernel_size, stride, padding, output_size):
    """PyTorch's _unpool_output_size: the size max pooling came from, or output_size checked
    against it (within one stride)."""
    shape = tuple(input.shape)
    nd = len(kernel_size)
    default = [(shape[len(shape) - nd + d] - 1) * stride[d] + kernel_size[d] - 2 * padding[d]
               for d in range(nd)]
    if output_size is None:
        ret = default
    else:
        if len(output_size) == nd + 2:
            output_size = output_size[2:]
        if len(output_size) != nd:
            raise ValueError(f"output_size should be a sequence containing {nd} or {nd + 2} "
                             f"elements, but it has a length of '{len(output_size)}'")
        for d in range(nd):
            lo, hi = default[d] - stride[d], default[d] + stride[d]
            if not lo < output_size[d] < hi:
                raise ValueError(f'invalid output_size "{output_size}" (dim {d} must be between '
                                 f"{lo} and {hi})")
        ret = list(output_size)
    for d in range(nd):
        if ret[d] < 0:
            raise ValueError("max_unpooling: output_size must contain non-negative spatial "
                             f"dimensions, but got output_size[{d}]={ret[d]}")
    return ret


def _max_unpool2d(input, indices, output_size):
    """ATen's max_unpool2d: input and indices (N, C, H, W) or (C, H, W) -> (.., oh, ow)."""
    oh, ow = (int(v) for v in output_size)
    if indices.dtype != int64:
        raise RuntimeError("elements in indices should be type int64 but got: "
                           f"{_NAMES.get(indices.dtype.name, indices.dtype.name)}")
    if input.dim() not in (3, 4):
        raise RuntimeError("Input to max_unpooling2d should be a 3d or 4d Tensor, but got a "
                           f"tensor with {input.dim()} dimensions.")
    if tuple(input.shape) != tuple(indices.shape):
        raise RuntimeError("Expected shape of indices to be same as that of the input tensor ("
                           f"{list(input.shape)}) but got indices tensor with shape: "
                           f"{list(indices.shape)}")
    if not input.is_floating_point():
        raise NotImplementedError(f'"max_unpool2d" not implemented for '
                                  f"'{_NAMES.get(input.dtype.name, input.dtype.name)}'")
    d = indices._data
    if isinstance(d, np.ndarray) and d.size:    # (a batched tensor under vmap has no values)
        bad = d[(d < 0) | (d >= oh * ow)]
        if bad.size:    # (PyTorch's loop keeps the last invalid index it meets)
            raise RuntimeError(f"Found an invalid max index: {int(bad.reshape(-1)[-1])} (output "
                               f"volumes are of size {oh}x{ow})")
    lead = tuple(input.shape[:-2])
    src = input.reshape(lead + (-1,))
    out = input.new_zeros(lead + (oh * ow,)).scatter(-1, indices.reshape(lead + (-1,)), src)
    return rename(out.view(lead + (oh, ow)), "MaxUnpool2DBackward0")


@float32_list
def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """As torch.nn.functional.max_unpool2d: max_pool2d's partial inverse, each value put back
    at its index (from return_indices=True) and zeros elsewhere."""
    kernel_size = _pair(kernel_size)
    stride = _pair(stride) if stride is not None else kernel_size
    padding = _pair(padding)
    size = _unpool_output_size(input, kernel_size, stride, padding, output_size)
    return _max_unpool2d(input, indices, size)


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """As torch.nn.functional.max_unpool1d: max_pool1d's partial inverse (max_unpool2d over a
    unit width, as PyTorch runs it)."""
    kernel_size = _single(kernel_size)
    stride = _single(stride) if stride is not None else kernel_size
    padding = _single(padding)
    size = list(_unpool_output_size(input, kernel_size, stride, padding, output_size)) + [1]
    return _max_unpool2d(input.unsqueeze(-1), indices.unsqueeze(-1), size).squeeze(-1)


# ---- local response normalisation ----------------------------------------------------------

def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """As torch.nn.functional.local_response_norm: x / (k + alpha * mean of x^2 over `size`
    neighbouring channels)^beta."""
    dim = input.dim()
    if dim < 3:
        # (PyTorch's message, its run of spaces included)
        raise ValueError(f"Expected 3D or higher dimensionality                          input "
                         f"(got {dim} dimensions)")
    if input.numel() == 0:
        return input
    div = input.mul(input)
    if dim == 3:
        div = div.unsqueeze(1)
        div = pad(div, (0, 0, size // 2, (size - 1) // 2))
        div = avg_pool2d(div, (size, 1), stride=1).squeeze(1)
    else:
        sizes = tuple(input.shape)
        div, = autocast_float32(div)    # (PyTorch's pool here is avg_pool3d: float32 list)
        # (PyTorch's view, raising where its does: a layout that cannot merge the dims after
        # the third; the dims after the channels merged for the 2-d pool, a copy if need be)
        div = div.view(sizes[0], 1, sizes[1], sizes[2], -1).reshape(sizes[0], 1, sizes[1], -1)
        div = pad(div, (0, 0, size // 2, (size - 1) // 2))
        div = avg_pool2d(div, (size, 1), stride=1).squeeze(1)
        div = div.view(sizes)
    div = div.mul(alpha).add(k).pow(beta)
    return input / div
