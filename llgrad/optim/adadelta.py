"""Adadelta with PyTorch's single-tensor update rule (state: step, square_avg, acc_delta)."""
from __future__ import annotations
from ..runtime.creation import zeros_like
from ..runtime.grad_mode import enable_grad, no_grad
from .optimizer import LrT, Optimizer, ParamsT, _check_lr, _add_scaled_, _lr
from ._state import new_step, tensor_steps, real_views

__all__ = ["Adadelta"]


class Adadelta(Optimizer):
    """Adadelta(params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, ...): PyTorch's rule and
    defaults."""
    dynamic_hypers = ("lr",)

    def __init__(self, params: ParamsT, lr: LrT = 1.0, rho: float = 0.9, eps: float = 1e-6,
                 weight_decay: float = 0, foreach: bool | None = None, *, capturable: bool = False,
                 maximize: bool = False, differentiable: bool = False) -> None:
        _check_lr(lr)
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize,
                        capturable=capturable, foreach=foreach, differentiable=differentiable)
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
        """One Adadelta step over every parameter that has a gradient; returns closure()."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr = _lr(group)      # (while tracing, a graph input)
            rho, eps, weight_decay = group["rho"], group["eps"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = new_step()
                    state["square_avg"] = zeros_like(p)
                    state["acc_delta"] = zeros_like(p)
                grad = -p.grad if group["maximize"] else p.grad
                p, grad, state = real_views(p, grad, state)
                square_avg, acc_delta = state["square_avg"], state["acc_delta"]
                state["step"].add_(1)
                if weight_decay != 0:
                    grad = grad.add(p, alpha=weight_decay)
                square_avg.mul_(rho).addcmul_(grad, grad, value=1 - rho)
                std = square_avg.add(eps).sqrt_()
                delta = acc_delta.add(eps).sqrt_()
                delta.div_(std).mul_(grad)
                acc_delta.mul_(rho).addcmul_(delta, delta, value=1 - rho)
                _add_scaled_(p, delta, -lr)
        return loss
