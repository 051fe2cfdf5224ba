"""F.batch_norm in training with running statistics: the op batch_norm_with_stats
(ir/ops_batch_norm.py) normalises the batch and gives its per-channel mean and unbiased
variance, which the update of the running ones reads. Eagerly the update writes the
buffers in place (runtime/buffer_update.py); traced, it is tensor ops recorded in the graph,
and the compiled kernel writes the statistics on its way (a mean and a var of the input for
the update were two or three more passes over every batch norm's input)."""
import numpy as np

from ..ir import OPS
from ..runtime import buffer_update, grad_mode, trace_state
from ..runtime.dispatch import call
from ..runtime.tensor import Tensor

_STATS_DTYPES = (np.float32, np.float64)


def train_with_running_stats(input, running_mean, running_var, weight, bias, momentum, eps):
    """batch_norm's result in training, after running_mean / running_var (either may be
    None) = (1 - momentum) * themselves + momentum * the batch's mean / unbiased variance
    over (0, 2, ...), the statistics in float64 rounded to the input's dtype (float32 for a
    float16 / bfloat16 input into float32 buffers, as PyTorch's mixed-type kernel), then to
    the buffer's. momentum: a number, or (a traced BatchNorm with momentum=None:
    layers_norm._traced_cumulative) a 0-d float64 tensor."""
    if type(input._data) is np.ndarray and input._data.dtype in _STATS_DTYPES \
            and not trace_state.state.vmap_levels:
        out, mean, var = call(OPS["batch_norm_with_stats"], (input, weight, bias),
                              {"eps": eps})
        with grad_mode.no_grad():
            _update(running_mean, mean.detach(), momentum)
            _update(running_var, var.detach(), momentum)
        return out
    # (vmap, meta tensors, float16: tensor ops over the input)
    _check_vmapped_stats(input, running_mean, running_var)
    with grad_mode.no_grad():
        dims = (0,) + tuple(range(2, input._data.ndim))
        x = input.detach()
        stats = running_mean if running_mean is not None else running_var
        if x.dtype.itemsize < 4 and x.dtype.is_floating_point and stats is not None \
                and stats.dtype.itemsize >= 4:
            # (PyTorch's mixed-type kernel: a float16 / bfloat16 input with float32 (or
            # wider) buffers gives its statistics in float32, not rounded to the input's)
            x = x.float()
        _update(running_mean, x.mean(dims) if running_mean is not None else None, momentum,
                fast=False)
        _update(running_var, x.var(dims, correction=1) if running_var is not None else None,
                momentum, fast=False)
    return call(OPS["batch_norm"], (input, weight, bias, None, None),
                {"training": True, "eps": eps})


def _update(buf, stat, momentum, fast=True):
    """buf.mul_(1 - momentum).add_(stat, alpha=momentum), in place without a tensor call
    where buffer_update.blend applies (fast); a tensor momentum as the same arithmetic in
    tensor ops, 1 - momentum and momentum cast to buf's dtype as a Python number would be."""
    if buf is None:
        return
    if isinstance(momentum, Tensor):
        buf.mul_((1 - momentum).to(buf.dtype)).add_(stat.to(buf.dtype) * momentum.to(buf.dtype))
    elif not (fast and buffer_update.blend(buf, stat._data, momentum)):
        buf.mul_(1 - momentum).add_(stat.to(buf.dtype), alpha=momentum)


def _check_vmapped_stats(input, running_mean, running_var):
    """Under vmap, a batched input's statistics cannot go into unbatched running buffers
    (their update in place would be per sample): PyTorch's error, not the in-place one."""
    levels = getattr(input, "_levels", ())     # (a BatchedTensor's vmap levels)
    if levels and any(b is not None and not set(levels) <= set(getattr(b, "_levels", ()))
                      for b in (running_mean, running_var)):
        raise RuntimeError(
            "Batch norm got a batched tensor as input while the running_mean or running_var, "
            "which will be updated in place, were not batched.\nIf you are using a module "
            "and do not need eval mode, please set `track_running_stats` to be False.If you "
            "are using a prebuilt module and do not need eval mode, please see the functorch "
            "website for resources on how to patch your module to work with vmap")
