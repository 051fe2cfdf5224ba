"""NAdam (Adam with Nesterov momentum; optionally decoupled weight decay) with PyTorch's
single-tensor update rule (state: step, mu_product, exp_avg, exp_avg_sq)."""
from __future__ import annotations
from ..runtime.creation import zeros_like
from ..runtime.grad_mode import enable_grad, no_grad
from ..runtime.hypers import hyper
from .optimizer import (LrT, ParamsT, Optimizer, _addcdiv_, _as_number, _check_lr,
                        _get_value, _lr, _moments_)
from ._state import new_step, tensor_steps, real_views

__all__ = ["NAdam"]


class NAdam(Optimizer):
    """NAdam(params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
    momentum_decay=4e-3, decoupled_weight_decay=False, ...): PyTorch's rule and defaults. A
    compiled step reads lr and betas at each call (OneCycleLR cycles beta1: a schedule does
    not re-trace it)."""
    dynamic_hypers = ("lr", "betas")

    def __init__(self, params: ParamsT, lr: LrT = 2e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, momentum_decay: float = 4e-3,
                 decoupled_weight_decay: bool = False, *, foreach: bool | None = None,
                 maximize: bool = False, capturable: bool = False,
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
        if not 0.0 <= momentum_decay:
            raise ValueError(f"Invalid momentum_decay value: {momentum_decay}")
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        momentum_decay=momentum_decay,
                        decoupled_weight_decay=decoupled_weight_decay, maximize=maximize,
                        foreach=foreach, capturable=capturable, differentiable=differentiable)
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            for k, v in (("maximize", False), ("foreach", None), ("capturable", False),
                         ("differentiable", False), ("decoupled_weight_decay", False)):
                group.setdefault(k, v)
        tensor_steps(self, ("step", "mu_product"))

    @no_grad()
    def step(self, closure=None):
        """One NAdam step over every parameter that has a gradient; returns closure()."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        for group in self.param_groups:
            # (while tracing, lr and the betas may be graph inputs: 0-d tensors)
            beta1, beta2 = hyper(group, "betas")
            lr = _lr(group)
            eps, weight_decay = group["eps"], group["weight_decay"]
            momentum_decay = group["momentum_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = new_step()
                    state["mu_product"] = new_step(1.0)
                    state["exp_avg"] = zeros_like(p)
                    state["exp_avg_sq"] = zeros_like(p)
                grad = -p.grad if group["maximize"] else p.grad
                p, grad, state = real_views(p, grad, state)
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                mu_product, step_t = state["mu_product"], state["step"]

                step_t.add_(1)
                step = _get_value(step_t)
                bias_correction2 = 1 - beta2 ** step
                if weight_decay != 0:
                    if group["decoupled_weight_decay"]:
                        p.mul_(1 - lr * weight_decay)
                    else:
                        grad = grad.add(p, alpha=weight_decay)

                # the momentum cache mu^t and mu^(t+1)
                mu = beta1 * (1.0 - 0.5 * (0.96 ** (step * momentum_decay)))
                mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * momentum_decay)))
                # (mu, traced a float64 0-d tensor, cast to float32 first as eager's number)
                mu_product.mul_(_as_number(mu, mu_product))

                _moments_(exp_avg, exp_avg_sq, grad, beta1, beta2)
                denom = exp_avg_sq.div(bias_correction2).sqrt()

                mu_product_next = _get_value(mu_product) * mu_next
                denom.add_(eps)
                _addcdiv_(p, grad, denom, -lr * (1.0 - mu) / (1.0 - _get_value(mu_product)))
                _addcdiv_(p, exp_avg, denom, (-lr * mu_next) / (1.0 - mu_product_next))
        return loss
