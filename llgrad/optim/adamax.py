"""Adamax (Adam with the infinity norm) with PyTorch's single-tensor update rule (state:
step, exp_avg, exp_inf)."""
from __future__ import annotations
from ..runtime.creation import zeros_like
from ..runtime.grad_mode import enable_grad, no_grad
from ..runtime.hypers import hyper, raw
from .optimizer import LrT, ParamsT
from .optimizer import (Optimizer, _addcdiv_, _as_number, _check_lr, _div, _get_value,
                        _lr)
from ._state import new_step, tensor_steps, real_views

__all__ = ["Adamax"]


class Adamax(Optimizer):
    """Adamax(params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, ...):
    PyTorch's rule and defaults. A compiled step reads lr and betas at each call (OneCycleLR
    cycles beta1: a schedule does not re-trace it)."""
    dynamic_hypers = ("lr", "betas")

    def __init__(self, params: ParamsT, lr: LrT = 2e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, foreach: bool | None = None, *,
                 maximize: bool = False, differentiable: bool = False,
                 capturable: bool = False) -> None:
        _check_lr(lr)
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, foreach=foreach,
                        maximize=maximize, differentiable=differentiable, capturable=capturable)
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            for k, v in (("foreach", None), ("maximize", False), ("differentiable", False),
                         ("capturable", False)):
                group.setdefault(k, v)
        tensor_steps(self)

    @no_grad()
    def step(self, closure=None):
        """One Adamax step over every parameter that has a gradient; returns closure()."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        for group in self.param_groups:
            # (while tracing, lr and the betas may be graph inputs: 0-d tensors)
            beta1, beta2 = hyper(group, "betas")
            lr = _lr(group)
            eps, weight_decay = group["eps"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = new_step()
                    state["exp_avg"] = zeros_like(p)
                    state["exp_inf"] = zeros_like(p)
                grad = -p.grad if group["maximize"] else p.grad
                p, grad, state = real_views(p, grad, state)
                exp_avg, exp_inf, step_t = state["exp_avg"], state["exp_inf"], state["step"]
                step_t.add_(1)
                if weight_decay != 0:
                    grad = grad.add(p, alpha=weight_decay)
                exp_avg.lerp_(grad, _as_number(1 - beta1, exp_avg))
                # torch.maximum(exp_inf.mul_(beta2), grad.abs().add_(eps), out=exp_inf)
                exp_inf.copy_(exp_inf.mul_(_as_number(beta2, exp_inf))
                              .maximum(grad.abs().add_(eps)))
                bias_correction = 1 - beta1 ** _get_value(step_t)
                clr = _div(lr, bias_correction, group, abs(raw(group, "betas")[0]) == 1)
                _addcdiv_(p, exp_avg, exp_inf, -clr)
        return loss
