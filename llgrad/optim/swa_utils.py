"""torch.optim.swa_utils: Stochastic Weight Averaging and exponential moving averages of a
model's weights. AveragedModel keeps a deep copy of a model whose parameters (and, with
use_buffers=True, buffers) are averaged at each update_parameters(model); SWALR anneals each
group's lr towards its swa_lr; update_bn recomputes BatchNorm running statistics over a
loader (a cumulative average: momentum None), as after SWA the averaged weights need them.

The arithmetic is PyTorch's on the CPU: the default average is avg + (p - avg) / (n + 1)
with n the long tensor n_averaged; get_ema_multi_avg_fn / get_swa_multi_avg_fn lerp in
place (torch._foreach_lerp_'s per-tensor lerp)."""
import itertools
import math
import warnings
from copy import deepcopy

from ..runtime.creation import tensor
from ..runtime.dtypes import long
from ..runtime.functions import is_complex, is_floating_point
from ..runtime.grad_mode import no_grad
from ..runtime.symbolic_math import cos as _cos
from ..runtime.tensor import Tensor
from ..nn.module import Module
from ..nn.layers_norm import _BatchNorm
from .lr_scheduler.base import LRScheduler, _format_param

__all__ = ["AveragedModel", "update_bn", "SWALR", "get_ema_multi_avg_fn",
           "get_swa_multi_avg_fn", "get_ema_avg_fn", "get_swa_avg_fn"]


def _is_float(t):
    return is_floating_point(t) or is_complex(t)


def get_ema_multi_avg_fn(decay=0.999):
    """An in-place EMA update of lists of tensors: ema.lerp_(p, 1 - decay) each."""
    if decay < 0.0 or decay > 1.0:
        raise ValueError(f"Invalid decay value {decay} provided. Please provide a value in "
                         "[0,1] range.")

    @no_grad()
    def ema_update(ema_param_list, current_param_list, _):
        if _is_float(ema_param_list[0]):
            for p_ema, p_model in zip(ema_param_list, current_param_list):
                p_ema.lerp_(p_model, 1 - decay)
        else:
            for p_ema, p_model in zip(ema_param_list, current_param_list, strict=True):
                p_ema.copy_(p_ema * decay + p_model * (1 - decay))
    return ema_update


def get_swa_multi_avg_fn():
    """An in-place running mean of lists of tensors: avg.lerp_(p, 1 / (n + 1)) each."""
    @no_grad()
    def swa_update(averaged_param_list, current_param_list, num_averaged):
        if _is_float(averaged_param_list[0]):
            weight = 1 / (num_averaged + 1)
            for p_avg, p_model in zip(averaged_param_list, current_param_list):
                p_avg.lerp_(p_model, weight)
        else:
            diffs = [p - a for a, p in zip(averaged_param_list, current_param_list)]
            if isinstance(num_averaged, Tensor):
                for a, d in zip(averaged_param_list, diffs):
                    a.addcdiv_(d, num_averaged + 1)
            else:
                for a, d in zip(averaged_param_list, diffs):
                    a.add_(d, alpha=1.0 / (num_averaged + 1))
    return swa_update


def get_ema_avg_fn(decay=0.999):
    """An EMA of one tensor: decay * ema + (1 - decay) * p (a new tensor)."""
    if decay < 0.0 or decay > 1.0:
        raise ValueError(f"Invalid decay value {decay} provided. Please provide a value in "
                         "[0,1] range.")

    @no_grad()
    def ema_update(ema_param, current_param, num_averaged):
        return decay * ema_param + (1 - decay) * current_param
    return ema_update


def get_swa_avg_fn():
    """The running mean of one tensor: avg + (p - avg) / (n + 1) (a new tensor)."""
    @no_grad()
    def swa_update(averaged_param, current_param, num_averaged):
        return averaged_param + (current_param - averaged_param) / (num_averaged + 1)
    return swa_update


class AveragedModel(Module):
    """torch.optim.swa_utils.AveragedModel: a deep copy of model (`.module`) whose weights
    update_parameters(model) averages, with the long buffer n_averaged counting the
    updates (state_dict: 'n_averaged', then 'module.<name>'). avg_fn(avg, p, n) returns
    the new average of one tensor; multi_avg_fn(avgs, ps, n) updates lists in place (only
    one of them); neither: the equal-weight running mean (SWA). use_buffers=True averages
    the buffers too (else they are copied from model). Calling it calls the copy."""

    def __init__(self, model, device=None, avg_fn=None, multi_avg_fn=None, use_buffers=False):
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise AssertionError("Only one of avg_fn and multi_avg_fn should be provided")
        self.module = deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", tensor(0, dtype=long))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def update_parameters(self, model):
        """Average model's parameters (and buffers, with use_buffers) into the copy; the
        first update copies them."""
        self_param = itertools.chain(self.module.parameters(), self.module.buffers()) \
            if self.use_buffers else self.parameters()
        model_param = itertools.chain(model.parameters(), model.buffers()) \
            if self.use_buffers else model.parameters()
        self_detached, model_detached = [], []
        copy_param = bool(self.n_averaged == 0)
        for p_averaged, p_model in zip(self_param, model_param):
            p_model_ = p_model.detach()
            self_detached.append(p_averaged.detach())
            model_detached.append(p_model_)
            if copy_param:
                p_averaged.detach().copy_(p_model_)
        if self.n_averaged > 0:
            if self.multi_avg_fn is not None or self.avg_fn is None:
                for group in _by_dtype(self_detached, model_detached):
                    self_params, model_params = group
                    if self.multi_avg_fn:
                        self.multi_avg_fn(self_params, model_params, self.n_averaged)
                    else:       # (PyTorch's path on the CPU: no foreach kernels there)
                        avg_fn = get_swa_avg_fn()
                        for p_averaged, p_model in zip(self_params, model_params, strict=True):
                            p_averaged.copy_(avg_fn(p_averaged, p_model, self.n_averaged))
            else:
                for p_averaged, p_model in zip(self_detached, model_detached, strict=True):
                    p_averaged.detach().copy_(
                        self.avg_fn(p_averaged.detach(), p_model, self.n_averaged))
        if not self.use_buffers:
            for b_swa, b_model in zip(self.module.buffers(), model.buffers(), strict=True):
                b_swa.detach().copy_(b_model.detach())
        self.n_averaged += 1


def _by_dtype(self_params, model_params):
    """[[avgs, ps]] grouped by the averaged tensor's dtype, in first-seen order (PyTorch's
    _group_tensors_by_device_and_dtype on one device)."""
    groups = {}
    for a, p in zip(self_params, model_params):
        g = groups.setdefault(a.dtype, [[], []])
        g[0].append(a)
        g[1].append(p)
    return list(groups.values())


@no_grad()
def update_bn(loader, model, device=None):
    """Recompute the running statistics of model's BatchNorm layers from one pass over
    loader (each item an input, or a list/tuple whose first element is): statistics reset,
    momentum None (a cumulative average) during the pass, then momenta and train/eval mode
    restored. A model without BatchNorm is left alone."""
    momenta = {}
    for module in model.modules():
        if isinstance(module, _BatchNorm):
            module.reset_running_stats()
            momenta[module] = module.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for module in momenta:
        module.momentum = None
    for input in loader:
        if isinstance(input, (list, tuple)):
            input = input[0]
        if device is not None:
            input = input.to(device)
        model(input)
    for bn_module in momenta:
        bn_module.momentum = momenta[bn_module]
    model.train(was_training)


class SWALR(LRScheduler):
    """torch.optim.swa_utils.SWALR: anneals each group's lr to its swa_lr (one value or one
    per group, stored as group['swa_lr']) over anneal_epochs steps, by a cosine
    (anneal_strategy='cos') or linear ramp, then keeps it there."""

    def __init__(self, optimizer, swa_lr, anneal_epochs=10, anneal_strategy="cos",
                 last_epoch=-1):
        swa_lrs = _format_param("swa_lr", optimizer, swa_lr)
        for lr, group in zip(swa_lrs, optimizer.param_groups, strict=True):
            group["swa_lr"] = lr
        if anneal_strategy not in ["cos", "linear"]:
            raise ValueError("anneal_strategy must be one of 'cos' or 'linear', "
                             f"instead got {anneal_strategy}")
        self._set_anneal_func(anneal_strategy)
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got "
                             f"{anneal_epochs}")
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    @staticmethod
    def _linear_anneal(t):
        return t

    @staticmethod
    def _cosine_anneal(t):
        return (1 - _cos(math.pi * t)) / 2     # (a counter's cosine stays traced)

    @staticmethod
    def _get_initial_lr(lr, swa_lr, alpha):
        if alpha == 1:
            return swa_lr
        return (lr - alpha * swa_lr) / (1 - alpha)

    def get_lr(self):
        """The groups' lr at this step: the previous step's lr traced back to the start of
        the ramp, then moved alpha of the way to swa_lr."""
        if not self._get_lr_called_within_step:
            warnings.warn("To get the last learning rate computed by the scheduler, please "
                          "use `get_last_lr()`.", UserWarning, stacklevel=2)
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        prev_t = max(0, min(1, (step - 1) / max(1, self.anneal_epochs)))
        prev_alpha = self.anneal_func(prev_t)
        prev_lrs = [self._get_initial_lr(group["lr"], group["swa_lr"], prev_alpha)
                    for group in self.optimizer.param_groups]
        t = max(0, min(1, step / max(1, self.anneal_epochs)))
        alpha = self.anneal_func(t)
        return [group["swa_lr"] * alpha + lr * (1 - alpha)
                for group, lr in zip(self.optimizer.param_groups, prev_lrs, strict=True)]

    def _set_anneal_func(self, anneal_strategy):
        self._anneal_strategy = anneal_strategy
        self.anneal_func = self._cosine_anneal if anneal_strategy == "cos" else \
            self._linear_anneal

    def state_dict(self):
        """The scheduler's state, without the optimizer and the anneal function."""
        return {key: value for key, value in self.__dict__.items()
                if key not in ("optimizer", "anneal_func")}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)
        self._set_anneal_func(self._anneal_strategy)
