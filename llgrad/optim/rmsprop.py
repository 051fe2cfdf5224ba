"""RMSprop (optionally centred, with momentum, L2 weight decay and maximize), with PyTorch's
single-tensor update rule and state layout (step, square_avg, momentum_buffer, grad_avg)."""
from __future__ import annotations
from ..runtime.creation import zeros_like
from ..runtime.grad_mode import enable_grad, no_grad
from ..runtime.hypers import hyper, raw
from .optimizer import (LrT, Optimizer, ParamsT, _add_scaled_, _addcdiv_, _as_number,
                        _check_lr, _lr)
from ._state import new_step, tensor_steps, real_views

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
    """RMSprop(params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
    centered=False, ...): PyTorch's rule and defaults; foreach is ignored, capturable and
    differentiable are not supported. A compiled step reads lr and momentum at each call
    (OneCycleLR cycles the momentum: a schedule does not re-trace it)."""
    dynamic_hypers = ("lr", "momentum")

    def __init__(self, params: ParamsT, lr: LrT = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0, momentum: float = 0, centered: bool = False,
                 capturable: bool = False, foreach: bool | None = None, maximize: bool = False,
                 differentiable: bool = False) -> None:
        _check_lr(lr)
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= momentum:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= alpha:
            raise ValueError(f"Invalid alpha value: {alpha}")
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
                        weight_decay=weight_decay, capturable=capturable, foreach=foreach,
                        maximize=maximize, differentiable=differentiable)
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            for k, v in (("momentum", 0), ("centered", False), ("foreach", None),
                         ("maximize", False), ("differentiable", False), ("capturable", False)):
                group.setdefault(k, v)
        tensor_steps(self)

    @no_grad()
    def step(self, closure=None):
        """One RMSprop step over every parameter that has a gradient; returns closure()."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr = _lr(group)      # (while tracing, lr and momentum may be graph inputs)
            alpha, eps, momentum = group["alpha"], group["eps"], hyper(group, "momentum")
            with_momentum = raw(group, "momentum") > 0     # (zero or not: in the guard key)
            weight_decay, centered = group["weight_decay"], group["centered"]
            # (every parameter's state is read before any is written, as PyTorch's
            # _init_group: a state without grad_avg or momentum_buffer after centered or
            # momentum was turned on raises KeyError with nothing changed)
            todo = []
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = -p.grad if group["maximize"] else p.grad
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = new_step()
                    state["square_avg"] = zeros_like(p)
                    if with_momentum:
                        state["momentum_buffer"] = zeros_like(p)
                    if centered:
                        state["grad_avg"] = zeros_like(p)
                p, grad, state = real_views(p, grad, state)
                todo.append((p, grad, state["step"], state["square_avg"],
                             state["grad_avg"] if centered else None,
                             state["momentum_buffer"] if with_momentum else None))
            for p, grad, step_t, square_avg, grad_avg, buf in todo:
                step_t.add_(1)
                if weight_decay != 0:
                    grad = grad.add(p, alpha=weight_decay)
                # (addcmul_, as PyTorch's: one rounding in bfloat16 / float16)
                square_avg.mul_(alpha).addcmul_(grad, grad, value=1 - alpha)
                if centered:
                    grad_avg.lerp_(grad, 1 - alpha)
                    avg = square_avg.addcmul(grad_avg, grad_avg, value=-1).sqrt_()
                else:
                    avg = square_avg.sqrt()
                avg = avg.add_(eps)
                if with_momentum:
                    buf.mul_(_as_number(momentum, buf)).addcdiv_(grad, avg)
                    _add_scaled_(p, buf, -lr)
                else:
                    _addcdiv_(p, grad, avg, -lr)
        return loss
