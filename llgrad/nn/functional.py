"""llgrad.nn.functional: PyTorch's functional layers over the op table."""
import warnings

import numpy as np

from ..ir import OPS
from ..runtime import grad_mode
from ..runtime.autocast_cast import autocast_float32
from ..runtime.dispatch import call, nondiff_error
from ..runtime.result_format import formatted
from ..runtime.shapes import broadcast_shapes as _broadcast_shapes
from ..runtime.tensor_args import need_tensor
from .functional_batch_norm import train_with_running_stats
from .functional_conv import conv2d, max_pool2d  # noqa: F401  (F.conv2d, F.max_pool2d)
from .functional_activation import (celu, elu, glu, hardshrink, hardsigmoid, hardswish,  # noqa: F401
                                  hardtanh, logsigmoid, mish, prelu, relu6, selu, softmin,
                                  floating_only, softshrink, softsign, tanhshrink, threshold)
from .functional_convt import conv1d, conv_transpose1d, conv_transpose2d  # noqa: F401
from .functional_distance import (cosine_similarity, normalize, pairwise_distance,  # noqa: F401
                                  pdist)
from .functional_linear import linear  # noqa: F401
from .functional_interp import interpolate, upsample, upsample_bilinear, upsample_nearest  # noqa: F401
from .functional_loss import (_NAMES, _broadcast as _loss_broadcast, _reduction,  # noqa: F401
                              _size_warning, binary_cross_entropy, check_class_weight,
                              check_target_shape, float_kernel, huber_loss, kl_div, l1_loss,
                              one_hot, smooth_l1_loss, weighted_mse_loss)
from .functional_norm import (check_batch_norm_args, check_mixed_dtype,  # noqa: F401
                              check_floating, check_norm_shapes, empty_batch_norm, group_norm,
                              instance_norm, rms_norm)
from .functional_pad import pad  # noqa: F401
from .functional_shuffle import (bilinear, celu_, channel_shuffle, elu_,  # noqa: F401
                                 hardtanh_, leaky_relu_, native_channel_shuffle,
                                 pixel_shuffle, pixel_unshuffle, relu_, selu_, threshold_)
from .functional_pool import (adaptive_avg_pool1d, adaptive_avg_pool2d,  # noqa: F401
                              adaptive_max_pool1d, adaptive_max_pool1d_with_indices,
                              adaptive_max_pool2d, adaptive_max_pool2d_with_indices, avg_pool1d,
                              avg_pool2d)
from .functional_extra import _dropout
from .functional_extra import (alpha_dropout, dropout1d, dropout2d, dropout3d,  # noqa: F401
                               feature_alpha_dropout, fold, max_pool1d, max_pool1d_with_indices,
                               max_pool2d_with_indices, unfold)
from .functional_loss_margin import (cosine_embedding_loss, gaussian_nll_loss,  # noqa: F401
                                     hinge_embedding_loss, margin_ranking_loss, multi_margin_loss,
                                     multilabel_margin_loss, multilabel_soft_margin_loss,
                                     poisson_nll_loss, soft_margin_loss, triplet_margin_loss,
                                     triplet_margin_with_distance_loss)
from .functional_attention import scaled_dot_product_attention  # noqa: F401
from .functional_multi_head import multi_head_attention_forward  # noqa: F401
from .functional_embedding_bag import embedding_renorm_, embedding_bag  # noqa: F401
from .functional_embedding_sparse import sparse_embedding
from .functional_grid import affine_grid, grid_sample, grid_sampler  # noqa: F401
from .functional_ctc import ctc_loss  # noqa: F401
from .functional_noise import gumbel_softmax, rrelu, rrelu_  # noqa: F401
from .functional_pool_more import (local_response_norm, lp_pool1d, lp_pool2d,  # noqa: F401
                                 max_unpool1d, max_unpool2d)
from .functional_conv3d import conv3d, conv_transpose3d  # noqa: F401
from .functional_fractional import (fractional_max_pool2d,  # noqa: F401
                                    fractional_max_pool2d_with_indices, fractional_max_pool3d,
                                    fractional_max_pool3d_with_indices)
from .functional_pool3d import (adaptive_avg_pool3d, adaptive_max_pool3d,  # noqa: F401
                                adaptive_max_pool3d_with_indices, avg_pool3d, lp_pool3d,
                                max_pool3d, max_pool3d_with_indices, max_unpool3d)


def relu(input, inplace=False):
    """As torch.nn.functional.relu."""
    need_tensor(input, "relu", "input", 1)
    return input.relu_() if inplace else input.relu()


def leaky_relu(input, negative_slope=0.01, inplace=False):
    """As torch.nn.functional.leaky_relu."""
    floating_only(input, "leaky_relu_cpu")
    if inplace:
        return input._iop("leaky_relu_", negative_slope=negative_slope)
    return input.leaky_relu(negative_slope)


def gelu(input, approximate="none"):
    """As torch.nn.functional.gelu (approximate='none' or 'tanh')."""
    if approximate not in ("none", "tanh"):
        raise RuntimeError("approximate argument must be either none or tanh.")
    floating_only(input, "GeluKernelImpl")
    return input.gelu(approximate)


def silu(input, inplace=False):
    """As torch.nn.functional.silu."""
    floating_only(input, "silu_cpu")
    return input._iop("silu") if inplace else input.silu()


def softplus(input, beta=1.0, threshold=20.0):
    """As torch.nn.functional.softplus."""
    floating_only(input, "softplus_cpu")
    return input.softplus(beta, threshold)


def sigmoid(input):
    """As torch.nn.functional.sigmoid."""
    return input.sigmoid()


def tanh(input):
    """As torch.nn.functional.tanh."""
    return input.tanh()


def _softmax_dim(ndim, name="softmax"):
    """PyTorch's implicit dim (with its deprecation warning): 0 for 0-, 1- and 3-d inputs."""
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call "
                  "to include dim=X as an argument.", UserWarning, stacklevel=3)
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input, dim=None, _stacklevel=3, dtype=None):   # (_stacklevel: unused)
    """As torch.nn.functional.softmax (no dim: PyTorch's implicit choice, with its warning)."""
    return input.softmax(dim if dim is not None else _softmax_dim(input.ndim), dtype)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):   # (_stacklevel: unused)
    """As torch.nn.functional.log_softmax (no dim: PyTorch's implicit choice, with its
    warning)."""
    return input.log_softmax(dim if dim is not None else _softmax_dim(input.ndim, "log_softmax"),
                             dtype)


def dropout(input, p=0.5, training=True, inplace=False):
    """As torch.nn.functional.dropout, with PyTorch's masks (ATen's bernoulli_(1 - p): a
    double uniform per element, in the input's memory order). Traced, the draw is a random
    op that compiled calls replay, not a baked mask."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    return _dropout(input, p, training, inplace, False, False)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """As torch.nn.functional.layer_norm."""
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    k = len(normalized_shape)
    check_norm_shapes(normalized_shape, weight, bias)
    check_mixed_dtype(input, weight, bias)
    if tuple(input._data.shape[input._data.ndim - k:]) != tuple(normalized_shape):
        raise RuntimeError(f"Given normalized_shape={list(normalized_shape)}, expected input with "
                           f"shape [*, {', '.join(map(str, normalized_shape))}], but got input "
                           f"of size{list(input._data.shape)}")
    check_floating(input, "LayerNormKernelImpl")
    return call(OPS["layer_norm"], (input, weight, bias), {"normalized_ndim": k, "eps": eps})


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    """As torch.nn.functional.batch_norm (in training, running_mean / running_var are
    updated in place): its own checks of eps, then aten_batch_norm."""
    shape = input._data.shape
    if len(shape) >= 2 and training and eps <= 0.0 and shape[0] * int(np.prod(shape[2:])) != 1:
        # (torch checks the batch size first: one value per channel raises that error later)
        raise ValueError(f"batch_norm eps must be positive during training, but got {eps}")
    if len(shape) >= 2 and not training and eps < 0.0:
        raise ValueError(f"batch_norm eps must be non-negative, but got {eps}")
    return formatted(lambda: aten_batch_norm(input, running_mean, running_var, weight, bias,
                                             training, momentum, eps), input)


def aten_batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
                    momentum=0.1, eps=1e-5):
    """F.batch_norm without its checks of eps, as torch.batch_norm and
    torch.native_batch_norm (which take any eps)."""
    if input._data.ndim < 2:
        raise ValueError(f"expected 2D or 3D input (got {input._data.ndim}D input)")
    check_batch_norm_args(input, weight, bias, running_mean, running_var)
    if training and (running_mean is None) != (running_var is None):
        raise ValueError("running_mean and running_var must either both be None or neither be "
                         "None")
    if input._data.size == 0:
        return empty_batch_norm(input, weight, bias)
    if training:
        # the op gets no statistics in training (they are updated here, under no_grad), so
        # its record cannot refuse ones that require grad: refuse them here (eval: record)
        if grad_mode.state.grad_enabled:
            for name, stat in (("running_mean", running_mean), ("running_var", running_var)):
                if stat is not None and stat.requires_grad:
                    raise nondiff_error("batch_norm", name)
        n = input._data.size // input._data.shape[1]
        if n == 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input "
                             f"size {input.size()}")
        if running_mean is not None or running_var is not None:
            return train_with_running_stats(input, running_mean, running_var, weight, bias,
                                            momentum, eps)
        return call(OPS["batch_norm"], (input, weight, bias, None, None),
                    {"training": True, "eps": eps})
    for name, stat in (("running_mean", running_mean), ("running_var", running_var)):
        if stat is None:
            raise RuntimeError(f"{name} must be defined in evaluation mode")
    return call(OPS["batch_norm"], (input, weight, bias, running_mean, running_var),
                {"training": False, "eps": eps})


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False):
    """As torch.nn.functional.embedding (max_norm renormalises the looked-up rows of weight
    in place first)."""
    need_tensor(input, "embedding", "indices", 2)
    if input.dtype.name not in ("int64", "int32"):
        raise RuntimeError("Expected tensor for argument #1 'indices' to have one of the following "
                           f"scalar types: Long, Int; but got {input.type()} instead (while "
                           "checking arguments for embedding)")
    if weight.dim() != 2:       # (a 1-D weight would give numbers, not rows)
        raise RuntimeError("'weight' must be 2-D")
    n = weight._data.shape[0]
    if padding_idx is not None and not -n <= padding_idx < max(n, 1):
        raise AssertionError("Padding_idx must be within num_embeddings")
    d = input._data
    if not isinstance(d, np.ndarray):       # batched (llgrad.func.vmap): as tensor ops
        d = input
    if not isinstance(d, np.ndarray):
        bad = input._data.size and (d.max() >= n or d.min() < 0)
    else:       # (the ufuncs' reduce, as d.max() calls it, without the method's wrapper)
        bad = d.size and (np.maximum.reduce(d, axis=None) >= n or
                          np.minimum.reduce(d, axis=None) < 0)
    if bad:                             # no negative indices
        raise IndexError("index out of range in self")
    if padding_idx is not None and padding_idx < 0:
        padding_idx += n
    if max_norm is not None and not weight.is_meta:   # PyTorch renormalises the used rows
        embedding_renorm_(weight, input, max_norm, norm_type)     # in place first
    if sparse and weight.requires_grad and grad_mode.is_grad_enabled():
        return sparse_embedding(input, weight, padding_idx, scale_grad_by_freq)
    attrs = {"padding_idx": padding_idx}
    if scale_grad_by_freq:
        attrs["scale_grad_by_freq"] = True
    return call(OPS["embedding"], (weight, input), attrs)


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
             reduction="mean"):
    """As torch.nn.functional.nll_loss."""
    reduction = _reduction(reduction, size_average, reduce)
    check_target_shape(input, target, weight)
    if target._dtype.name in ("int64", "uint8"):    # (a wrong target dtype is reported first)
        floating_only(input, "nll_loss2d_forward_out_frame" if input.dim() > 2
                      else "nll_loss_out_frame")
    if weight is not None and weight.requires_grad and grad_mode.is_grad_enabled():
        raise nondiff_error("nll_loss2d_forward" if input.dim() > 2 else "nll_loss_forward",
                            "weight")
    if input._data.ndim == 1 and target._data.shape in ((), (1,)):
        # one sample: PyTorch's nll_loss takes it as is (NllLossBackward0, a 0-d loss)
        return _nll_loss_1d(input, target.reshape(()) if target._data.ndim else target,
                            weight, ignore_index, reduction)
    if input._data.ndim == 1:
        return nll_loss(input.unsqueeze(0), target.unsqueeze(0), weight, None, ignore_index,
                        None, reduction).squeeze(0) if reduction == "none" else \
            nll_loss(input.unsqueeze(0), target.unsqueeze(0), weight, None, ignore_index, None,
                     reduction)
    _check_target(target, input, weight)
    c = input._data.shape[1]
    t = target._data
    if not isinstance(t, np.ndarray):
        t = target      # (batched under llgrad.func.vmap: tensor ops)
    # (traced, the op checks every call's targets itself: a compiled call's kernel raises
    # its flag at a target outside [0, C), and the call runs again eagerly, raising here)
    # (on an array: two reductions, and the elementwise test only where one finds a target
    # outside [0, C), which may be ignore_index)
    if not isinstance(t, np.ndarray) or t.size and (
            np.minimum.reduce(t, axis=None) < 0 or np.maximum.reduce(t, axis=None) >= c):
        bad = (t != ignore_index) & ((t < 0) | (t >= c))
        if bad.any():
            raise IndexError(f"Target {int(t[bad].reshape(-1)[0])} is out of bounds.")
    nd = input._data.ndim
    if reduction == "none" and (nd == 3 or nd > 4) and input._data.size and target._data.size:
        # PyTorch runs these as (N, C, 1, -1) and views the loss back (ViewBackward0)
        n = input._data.shape[0]
        out = call(OPS["nll_loss"], (input.contiguous().view(n, c, 1, -1),
                                     target.contiguous().view(n, 1, -1), weight),
                   {"ignore_index": ignore_index, "reduction": reduction})
        return out.view((n,) + input._data.shape[2:])
    return call(OPS["nll_loss"], (input, target, weight),
                {"ignore_index": ignore_index, "reduction": reduction})


def _check_target(target, input=None, weight=None):
    """PyTorch's nll_loss takes Long or Byte class indices only, and a weight of input's
    dtype."""
    if target._dtype.name not in ("int64", "uint8"):
        raise RuntimeError("expected target dtype to be Long or Byte, but got "
                           + _NAMES.get(target._dtype.name, target._dtype.name))
    if input is not None and input.dim() > 2 and target._dtype.name == "uint8":
        raise RuntimeError("expected scalar type Long but found Byte")     # (nll_loss2d's)
    if weight is not None and weight._dtype is not input._dtype:
        raise RuntimeError(f"expected scalar type {_NAMES.get(input._dtype.name)} but found "
                           f"{_NAMES.get(weight._dtype.name)}")


def _nll_loss_1d(input, target, weight, ignore_index, reduction):
    _check_target(target, input, weight)
    # (a batched target under llgrad.func.vmap has no value here, and a traced one's is the
    # traced call's: the op checks every call's target itself)
    t = int(target._data) if isinstance(target._data, np.ndarray) else ignore_index
    if t != ignore_index and not 0 <= t < input._data.shape[0]:
        raise IndexError(f"Target {t} is out of bounds.")
    return call(OPS["nll_loss"], (input, target, weight),
                {"ignore_index": ignore_index, "reduction": reduction})


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                  reduction="mean", label_smoothing=0.0):
    """As torch.nn.functional.cross_entropy (class indices or class probabilities; weight,
    ignore_index, label_smoothing)."""
    need_tensor(input, "cross_entropy_loss", "input", 1)
    need_tensor(target, "cross_entropy_loss", "target", 2)
    input, target, weight = autocast_float32(input, target, weight)
    reduction = _reduction(reduction, size_average, reduce)
    class_dim = 0 if input._data.ndim == 1 else 1
    probs = input._data.shape == target._data.shape     # PyTorch: same shape, probabilities
    if probs and not target._dtype.is_floating_point:
        raise RuntimeError("Expected floating point type for target with class probabilities, "
                           "got " + _NAMES.get(target._dtype.name, target._dtype.name))
    if probs and ignore_index >= 0:
        raise RuntimeError("ignore_index is not supported for floating point target")
    if label_smoothing > 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    logp = input.log_softmax(class_dim)
    if probs:                                    # class probabilities (PyTorch's formula)
        c = input._data.shape[class_dim]
        check_class_weight(weight, c, "cross_entropy: ")
        if label_smoothing > 0.0:
            target = target * (1 - label_smoothing) + label_smoothing / max(c, 1)  # (c: 0)
        prod = logp * target
        if weight is not None:
            prod = prod * (weight.view((-1,) + (1,) * (logp.ndim - 2)) if logp.ndim > 1
                           else weight)
        if reduction == "none":
            return -prod.sum(class_dim)
        if reduction == "sum":
            return -prod.sum()
        # PyTorch divides by the batch size as an int (div.Scalar: DivBackward1)
        return call(OPS["div_scalar"], (-prod.sum(), input._data.size // c if c else 0), {})
    loss = nll_loss(logp, target, weight, ignore_index=ignore_index, reduction=reduction)
    if not label_smoothing > 0.0:                # (PyTorch ignores a negative one)
        return loss
    c = input._data.shape[class_dim]
    w = logp if weight is None else logp * weight.reshape((-1,) + (1,) * (logp.ndim - 2 if logp.ndim > 1 else 0))
    smooth = -w.sum(class_dim)
    keep = target != ignore_index
    smooth = smooth.masked_fill(keep.logical_not(), 0)
    if reduction == "mean":
        if weight is None:
            smooth = smooth.sum() / keep.sum()
        else:
            smooth = smooth.sum() / weight.index_select(0, target.where(keep, 0).reshape(-1)) \
                .masked_fill(keep.reshape(-1).logical_not(), 0).sum()
    elif reduction == "sum":
        smooth = smooth.sum()
    return loss * (1 - label_smoothing) + smooth * (label_smoothing / c)


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """As torch.nn.functional.mse_loss."""
    reduction = _reduction(reduction, size_average, reduce)
    if input._data.shape != target._data.shape:
        _size_warning(input, target)
    if weight is not None:
        return weighted_mse_loss(input, target, weight, reduction)
    float_kernel(input, target, "mse_cpu")
    if input._data.shape != target._data.shape:
        input, target = _loss_broadcast(input, target)
    return call(OPS["mse_loss"], (input, target), {"reduction": reduction})


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None,
                                     reduction="mean", pos_weight=None):
    """As torch.nn.functional.binary_cross_entropy_with_logits."""
    reduction = _reduction(reduction, size_average, reduce)
    if input._data.shape != target._data.shape:
        raise ValueError(f"Target size ({target.shape}) must be the same as input size "
                         f"({input.shape})")
    # PyTorch's composition: log_sigmoid(input), then (1 - target).mul_(input) (so the loss
    # has target's dtype) and the in-place products with pos_weight and weight
    if not input._dtype.is_floating_point:
        raise NotImplementedError('"log_sigmoid_cpu" not implemented for '
                                  f"'{_NAMES.get(input._dtype.name, input._dtype.name)}'")
    if target._dtype._cat == 0:
        raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not "
                           "supported. Use the `^` or `logical_xor()` operator instead.")
    if not target._dtype.is_floating_point:
        raise RuntimeError(f"result type {_NAMES.get(input._dtype.name)} can't be cast to the "
                           f"desired output type {_NAMES.get(target._dtype.name)}")
    for w in (pos_weight, weight):
        if w is not None and _broadcast_shapes(w._data.shape, input._data.shape) \
                != input._data.shape:
            raise RuntimeError(f"output with shape {list(input._data.shape)} doesn't match the "
                               "broadcast shape "
                               f"{list(_broadcast_shapes(w._data.shape, input._data.shape))}")
    if target._dtype is not input._dtype:
        input = input.to(target._dtype)
    return call(OPS["binary_cross_entropy_with_logits"], (input, target, weight, pos_weight),
                {"reduction": reduction})
