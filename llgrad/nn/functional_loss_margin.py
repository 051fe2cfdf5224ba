"""The margin, embedding and likelihood losses, as the compositions PyTorch's ATen runs
(Loss.cpp, LossMultiMargin.cpp): margin_ranking_loss, hinge_embedding_loss,
cosine_embedding_loss, soft_margin_loss, multilabel_soft_margin_loss, multi_margin_loss,
multilabel_margin_loss, triplet_margin_loss(_with_distance_loss), poisson_nll_loss,
gaussian_nll_loss."""
import math

import numpy as np

from ..ir.ops_losses import EPSILON
from ..runtime import trace_state
from ..runtime.creation import ones_like, zeros_like
from ..runtime.dtypes import float32, float64, int64
from ..runtime.dispatch import nondiff_error, scalar_type_name
from ..runtime.functions import minimum, where
from ..runtime.grad_mode import is_grad_enabled, no_grad
from ..runtime.shapes import broadcast_shapes
from .functional_activation import logsigmoid
from .functional_distance import pairwise_distance
from .functional_loss import _NAMES, _reduction
from ..runtime.node_names import torch_node
from ..runtime.autocast_cast import autocast_float32

__all__ = ["margin_ranking_loss", "hinge_embedding_loss", "cosine_embedding_loss",
           "soft_margin_loss", "multilabel_soft_margin_loss", "multi_margin_loss",
           "multilabel_margin_loss",
           "triplet_margin_loss", "triplet_margin_with_distance_loss", "poisson_nll_loss",
           "gaussian_nll_loss"]


def _float_kernel(input, kernel):
    """ATen dispatches these losses' kernels over float and double only."""
    if input.dtype not in (float32, float64):
        raise NotImplementedError(f'"{kernel}" not implemented for '
                                  f"'{scalar_type_name(input.dtype)}'")


def _reduce(loss, reduction):
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def margin_ranking_loss(input1, input2, target, margin=0, size_average=None, reduce=None,
                        reduction="mean"):
    """max(0, -target * (input1 - input2) + margin), as torch.nn.functional's."""
    input1, input2, target = autocast_float32(input1, input2, target)
    reduction = _reduction(reduction, size_average, reduce)
    if input1.dim() != input2.dim() or input1.dim() != target.dim():
        raise RuntimeError("margin_ranking_loss : All input tensors should have same dimension "
                           f"but got sizes: input1: {input1.size()}, input2: {input2.size()}, "
                           f"target: {target.size()} ")
    if type(margin) in (int, bool):     # (ATen takes a double: integer inputs give float32)
        margin = float(margin)
    return _reduce((-target * (input1 - input2) + margin).clamp_min(0), reduction)


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None,
                         reduction="mean"):
    """input where target is 1, max(0, margin - input) where it is -1."""
    input, target = autocast_float32(input, target)
    reduction = _reduction(reduction, size_average, reduce)
    zeros = input.new_zeros(()).expand(input.shape) if input.dim() else input.new_zeros(())
    if type(margin) is float and not input.is_floating_point() and not input.is_complex():
        margin = int(margin)    # (ATen's margin - input fills a tensor like input with it)
    margin_clamp = (margin - input).clamp_min(0)
    output = where(target != 1, margin_clamp, zeros) + where(target != -1, input, zeros)
    return _reduce(output, reduction)


def cosine_embedding_loss(input1, input2, target, margin=0, size_average=None, reduce=None,
                          reduction="mean"):
    """1 - cos(x1, x2) where target is 1, max(0, cos - margin) where it is -1."""
    input1, input2, target = autocast_float32(input1, input2, target)
    reduction = _reduction(reduction, size_average, reduce)
    targ_dim = target.dim()
    if targ_dim not in (0, 1):
        raise RuntimeError(f"0D or 1D target tensor expected, multi-target not supported")
    if targ_dim == 1:
        if input1.dim() != 2 or input2.dim() != 2:
            raise RuntimeError(f"1D target tensor expects 2D input tensors, but found inputs "
                               f"with sizes {list(input1.shape)} and {list(input2.shape)}.")
    elif input1.dim() != 1 or input2.dim() != 1:
        raise RuntimeError(f"0D target tensor expects 1D input tensors, but found inputs with "
                           f"sizes {list(input1.shape)} and {list(input2.shape)}.")
    dim = 1 if targ_dim == 1 else 0
    eps = EPSILON       # (ATen's: a float, 1e-12 rounded to float32)
    prod_sum = (input1 * input2).sum(dim)
    mag_square1 = (input1 * input1).sum(dim) + eps
    mag_square2 = (input2 * input2).sum(dim) + eps
    cos = prod_sum / (mag_square1 * mag_square2).sqrt()
    zeros = cos.new_zeros(()).expand(cos.shape) if cos.dim() else cos.new_zeros(())
    output = where(target == 1, 1 - cos, zeros) + \
        where(target == -1, (cos - margin).clamp_min(0), zeros)
    return _reduce(output, reduction)


@torch_node("SoftMarginLossBackward0")
def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """log(1 + exp(-target * input))."""
    input, target = autocast_float32(input, target)
    reduction = _reduction(reduction, size_average, reduce)
    if target.requires_grad:        # (PyTorch's op has a backward for input only)
        raise nondiff_error("soft_margin_loss", "target")
    shape = broadcast_shapes(tuple(input.shape), tuple(target.shape))
    if shape != tuple(input.shape):     # (ATen's kernel writes into an output of input's shape)
        raise RuntimeError(f"output with shape {list(input.shape)} doesn't match the broadcast "
                           f"shape {list(shape)}")
    loss = (-input * target).exp().log1p()
    # PyTorch's kernel writes into an output of input's dtype
    if not input.is_floating_point() and not input.is_complex():
        raise RuntimeError(f"result type {scalar_type_name(loss.dtype)} can't be cast to the "
                           f"desired output type {scalar_type_name(input.dtype)}")
    return _reduce(loss if loss.dtype == input.dtype else loss.to(input.dtype), reduction)


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None,
                                reduction="mean"):
    """The binary logistic loss of each class, averaged over the classes (on none of
    CPU autocast's lists, as in PyTorch)."""
    if size_average is not None or reduce is not None:
        reduction = _reduction(reduction, size_average, reduce)
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    class_dim = input.dim() - 1
    loss = loss.sum(dim=class_dim) / input.size(class_dim)
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    return _reduce(loss, reduction)


@torch_node("MultiMarginLossBackward0")
def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None,
                      reduce=None, reduction="mean"):
    """sum over j != y of max(0, margin - x[y] + x[j]) ** p (times weight[y]) / C."""
    input, target, weight = autocast_float32(input, target, weight)
    reduction = _reduction(reduction, size_average, reduce)
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    if weight is not None and weight.dim() != 1:
        raise ValueError("weight must be one-dimensional")
    if weight is not None and weight.requires_grad and is_grad_enabled():
        raise nondiff_error("multi_margin_loss", "weight")
    nd, shape = input.dim(), list(input.shape)
    if not ((nd == 2 and shape[1] != 0) or (nd == 1 and shape[0] != 0) or nd == 0):
        raise RuntimeError("Expected non-empty vector or matrix with optional 0-dim batch size, "
                           f"but got: {shape}")
    x = input if input.dim() == 2 else input.reshape(1, -1)
    y = target.reshape(-1)
    n, c = x.shape
    if target.dim() > 1 or y.shape[0] != n:
        raise RuntimeError("multi_margin_loss: target tensor should be 1-D with size equal to the "
                           f"number of input samples (batch size). Expected target size [{n}], "
                           f"but got {list(target.shape)}. Input has shape {shape}.")
    if weight is not None and weight.numel() != c:
        raise RuntimeError(f"inconsistent weight size, expected {c} but got {list(weight.shape)}")
    _float_kernel(input, "multi_margin_loss_cpu_kernel")
    if target.dtype is not int64:       # (a float target would be read as class numbers)
        raise RuntimeError(f"expected scalar type Long but found "
                           f"{scalar_type_name(target.dtype)}")
    if n and weight is not None and weight.dtype != input.dtype:   # (the kernel's typed read)
        raise RuntimeError(f"expected scalar type {scalar_type_name(input.dtype)} but found "
                           f"{scalar_type_name(weight.dtype)}")
    # (on the array, as nll_loss checks: no value read for a trace to guard on; traced, the
    # gather below flags a target outside [0, C) and the call runs again eagerly, raising
    # here; batched under llgrad.func.vmap, no array: gather checks)
    t = y._data
    if n and isinstance(t, np.ndarray) and (np.minimum.reduce(t, axis=None) < 0 or
                                            np.maximum.reduce(t, axis=None) >= c):
        raise RuntimeError("target out of range")
    x_y = x.gather(1, y.unsqueeze(1))
    z = (margin - x_y + x).relu()       # (PyTorch's kernel: no gradient at z == 0)
    h = z if p == 1 else z * z
    if weight is not None:
        h = h * weight.gather(0, y).unsqueeze(1)
    not_target = y.unsqueeze(1) != y.new_tensor(list(range(c))).unsqueeze(0)
    loss = where(not_target, h, h.new_zeros(())).sum(1) / c
    if input.dim() < 2 and reduction == "none":
        loss = loss.reshape(target.shape)
    return _reduce(loss, reduction)


@torch_node("MultilabelMarginLossBackward0")
def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """sum over the targets j and the non-target classes i of max(0, 1 - (x[y_j] - x[i])),
    divided by C; a row's targets are its entries of target up to the first -1 (ATen's
    MultiLabelMarginCriterion). Every (target, class) pair is formed at once: (N, C, C)."""
    input, target = autocast_float32(input, target)
    reduction = _reduction(reduction, size_average, reduce)
    nd = input.dim()
    shape = list(input.shape)
    if not ((nd == 2 and shape[1] != 0) or (nd == 1 and shape[0] != 0) or nd == 0):
        raise RuntimeError("Expected non-empty vector or matrix with optional 0-dim batch size, "
                           f"but got: {shape}")
    c = 1 if nd == 0 else shape[-1]
    if (nd <= 1 and not (target.dim() <= 1 and target.numel() == c)) or \
            (nd == 2 and list(target.shape) != shape):
        raise RuntimeError(f"inconsistent target size: {list(target.shape)} for input of size: "
                           f"{shape}")
    kernel = "multilabel_margin_loss_forward_out_frame"
    if target.dtype != int64:
        _float_kernel(input, kernel)    # (ATen: the dispatch, then the target's typed read)
        raise RuntimeError("expected scalar type Long but found "
                           f"{_NAMES.get(target.dtype.name, target.dtype.name)}")
    t = target._data
    if trace_state.reused() and isinstance(t, np.ndarray) and t.size:
        t = target          # (the check as tensor ops: a value guard of the trace)
    if t.size and (t.min() < -1 or t.max() >= c) if isinstance(t, np.ndarray) else \
            t is target and bool(((t < -1) | (t >= c)).any()):
        raise RuntimeError("argument #2 'target' is out of range")
    _float_kernel(input, kernel)        # (ATen checks the targets' range before dispatching)
    x = input.reshape(-1, c)
    y = target.reshape(-1, c)
    valid = (y >= 0).to(int64).cumprod(1) > 0          # the targets: up to the first -1
    y = y.clamp_min(0)
    is_target = zeros_like(y).scatter_add(1, y, valid.to(int64)) > 0
    x_y = x.gather(1, y)                                # (N, C): the score of target j
    z = 1 - x_y.unsqueeze(2) + x.unsqueeze(1)           # (N, j, i)
    pairs = valid.unsqueeze(2) & is_target.logical_not().unsqueeze(1)
    loss = where(pairs, z, z.new_zeros(())).relu().sum((1, 2)) / c
    if nd <= 1:
        loss = loss.reshape(())
    return _reduce(loss, reduction)


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False,
                        size_average=None, reduce=None, reduction="mean"):
    """max(0, margin + d(anchor, positive) - d(anchor, negative)), d the p-norm distance."""
    anchor, positive, negative = autocast_float32(anchor, positive, negative)
    reduction = _reduction(reduction, size_average, reduce)
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    a, pd, nd = anchor.dim(), positive.dim(), negative.dim()
    if not a == pd == nd:
        raise RuntimeError("The anchor, positive, and negative tensors are expected to have the "
                           f"same number of dimensions, but got: anchor {a}D, positive {pd}D, and "
                           f"negative {nd}D inputs")
    dist_pos = pairwise_distance(anchor, positive, p, eps)
    dist_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        dist_neg = minimum(dist_neg, pairwise_distance(positive, negative, p, eps))
    return _reduce((margin + dist_pos - dist_neg).clamp_min(0), reduction)


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None,
                                      margin=1.0, swap=False, reduction="mean"):
    """triplet_margin_loss with any distance_function (pairwise_distance by default)."""
    if margin <= 0:
        raise ValueError(f"TripletMarginWithDistanceLoss: expected margin to be greater than 0, "
                         f"got {margin} instead")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    a, pd, nd = anchor.ndim, positive.ndim, negative.ndim
    if not (a == pd == nd):
        raise RuntimeError("The anchor, positive, and negative tensors are expected to have the "
                           f"same number of dimensions, but got: anchor {a}D, positive {pd}D, and "
                           f"negative {nd}D inputs")
    dist = distance_function if distance_function is not None else pairwise_distance
    dist_pos, dist_neg = dist(anchor, positive), dist(anchor, negative)
    if swap:
        dist_neg = minimum(dist_neg, dist(positive, negative))
    return _reduce((margin + dist_pos - dist_neg).clamp_min(0), reduction)


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8,
                     reduce=None, reduction="mean"):
    """exp(input) - target * input (log_input), else input - target * log(input + eps); full
    adds Stirling's term where target > 1."""
    input, target = autocast_float32(input, target)
    if size_average is not None or reduce is not None:
        reduction = _reduction(reduction, size_average, reduce)
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not a valid value for reduction")
    loss = input.exp() - target * input if log_input else input - target * (input + eps).log()
    if full:
        stirling = target * target.log() - target + 0.5 * (2 * math.pi * target).log()
        loss = loss + stirling.masked_fill(target <= 1, 0)
    return _reduce(loss, reduction)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """0.5 (log(max(var, eps)) + (input - target)^2 / max(var, eps)) (+ log(2 pi) / 2)."""
    if isinstance(var, float):
        if var < 0:
            raise ValueError("var has negative entry/entries")
        var = var * ones_like(input)
    elif bool((var < 0).any()):
        raise ValueError("var has negative entry/entries")
    if var.size() != input.size():
        if input.size()[:-1] == var.size():
            var = var.unsqueeze(-1)
        elif input.ndim == var.ndim and sum(y for x, y in zip(input.size(), var.size())
                                            if x != y) == 1:
            pass
        else:
            raise ValueError("var is of incorrect size")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    var = var.clone()
    with no_grad():
        var.clamp_(min=eps)
    loss = 0.5 * (var.log() + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)
