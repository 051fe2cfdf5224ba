"""RAdam (rectified Adam; optionally decoupled weight decay) with PyTorch's single-tensor
update rule (state: step, exp_avg, exp_avg_sq). The rectification applies from the step
where the approximated SMA length exceeds 5: a Python branch in eager mode; while traced,
both updates are computed and `where` picks one (PyTorch's capturable form), so a compiled
step does not re-trace when the branch flips, nor when a schedule (OneCycleLR, CyclicLR)
cycles beta1: lr and the betas are read at each call."""
from __future__ import annotations
from ..runtime.creation import zeros_like
from ..runtime.functions import where
from ..runtime.grad_mode import enable_grad, no_grad
from ..runtime.hypers import hyper
from .optimizer import Optimizer, _check_lr, _get_value, _lr, _moments_, _tracing
from .optimizer import LrT, ParamsT
from ._state import new_step, tensor_steps, real_views

__all__ = ["RAdam"]


class RAdam(Optimizer):
    """RAdam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
    decoupled_weight_decay=False, ...): PyTorch's rule and defaults."""
    dynamic_hypers = ("lr", "betas")

    def __init__(self, params: ParamsT, lr: LrT = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, decoupled_weight_decay: bool = False,
                 *, foreach: bool | None = None, maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False) -> None:
        _check_lr(lr)
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        maximize=maximize, foreach=foreach, capturable=capturable,
                        decoupled_weight_decay=decoupled_weight_decay,
                        differentiable=differentiable)
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            for k, v in (("foreach", None), ("maximize", False), ("differentiable", False),
                         ("decoupled_weight_decay", False), ("capturable", False)):
                group.setdefault(k, v)
        tensor_steps(self)

    @no_grad()
    def step(self, closure=None):
        """One RAdam step over every parameter that has a gradient; returns closure()."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        traced = _tracing()
        for group in self.param_groups:
            beta1, beta2 = hyper(group, "betas")     # (while tracing, graph inputs: 0-d
            lr = _lr(group)                          # tensors, as lr)
            eps, weight_decay = group["eps"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = new_step()
                    state["exp_avg"] = zeros_like(p)
                    state["exp_avg_sq"] = zeros_like(p)
                grad = -p.grad if group["maximize"] else p.grad
                p, grad, state = real_views(p, grad, state)
                exp_avg, exp_avg_sq, step_t = state["exp_avg"], state["exp_avg_sq"], state["step"]

                step_t.add_(1)
                step = _get_value(step_t)
                if weight_decay != 0:
                    if group["decoupled_weight_decay"]:
                        p.mul_(1 - lr * weight_decay)
                    else:
                        grad = grad.add(p, alpha=weight_decay)

                _moments_(exp_avg, exp_avg_sq, grad, beta1, beta2)
                bias_correction1 = 1 - beta1 ** step
                bias_correction2 = 1 - beta2 ** step
                bias_corrected_exp_avg = exp_avg / bias_correction1
                rho_inf = 2 / (1 - beta2) - 1          # maximum length of the approximated SMA
                rho_t = rho_inf - 2 * step * (beta2 ** step) / bias_correction2

                def rect():
                    r = (rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2)
                                                               * rho_t)
                    if traced:     # (the branch not taken may be negative: no NaN warnings)
                        r = r.clamp_min(0.0)
                    return r ** 0.5

                def adaptive_lr():
                    return (bias_correction2 ** 0.5) / exp_avg_sq.sqrt().add_(eps)

                if traced:
                    plain = bias_corrected_exp_avg * lr
                    rectified = bias_corrected_exp_avg * lr * adaptive_lr() * rect()
                    p.add_(where(rho_t > 5.0, rectified, plain), alpha=-1.0)
                elif rho_t > 5.0:
                    p.add_(bias_corrected_exp_avg * lr * adaptive_lr() * rect(), alpha=-1.0)
                else:
                    p.add_(bias_corrected_exp_avg * lr, alpha=-1.0)
        return loss
