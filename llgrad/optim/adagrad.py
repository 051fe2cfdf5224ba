"""Adagrad with PyTorch's single-tensor update rule. As in PyTorch, the state (step, sum)
of every parameter is made when the optimiser is constructed."""
from __future__ import annotations
from ..runtime.creation import full_like
from ..runtime.functions_sparse import sparse_coo_tensor
from ..runtime.grad_mode import enable_grad, no_grad
from .optimizer import LrT, ParamsT
from .optimizer import (Optimizer, _addcdiv_, _check_lr, _div, _for_loop_only, _get_value,
                        _lr)
from ._state import new_step, tensor_steps, real_views

__all__ = ["Adagrad"]


class Adagrad(Optimizer):
    """Adagrad(params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0,
    eps=1e-10, ...): PyTorch's rule and defaults; state made at construction, as PyTorch."""
    dynamic_hypers = ("lr",)

    def __init__(self, params: ParamsT, lr: LrT = 1e-2, lr_decay: float = 0,
                 weight_decay: float = 0, initial_accumulator_value: float = 0, eps: float = 1e-10,
                 foreach: bool | None = None, *, maximize: bool = False,
                 differentiable: bool = False, fused: bool | None = None) -> None:
        _check_lr(lr)
        if not 0.0 <= lr_decay:
            raise ValueError(f"Invalid lr_decay value: {lr_decay}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= initial_accumulator_value:
            raise ValueError("Invalid initial_accumulator_value value: "
                             f"{initial_accumulator_value}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        _for_loop_only(fused=fused, foreach=foreach)
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, foreach=foreach,
                        maximize=maximize, differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                self._init_state(p)

    def _init_state(self, p):
        state = self.state[p]
        state["step"] = new_step()
        state["sum"] = full_like(p, self.defaults["initial_accumulator_value"])

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            for k, v in (("foreach", None), ("maximize", False), ("differentiable", False),
                         ("fused", None)):
                group.setdefault(k, v)
        tensor_steps(self)

    @no_grad()
    def step(self, closure=None):
        """One Adagrad step over every parameter that has a gradient; returns closure()."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr = _lr(group)      # (while tracing, a graph input)
            weight_decay, lr_decay, eps = group["weight_decay"], group["lr_decay"], group["eps"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if len(state) == 0:                 # a parameter added after construction
                    self._init_state(p)
                grad = -p.grad if group["maximize"] else p.grad
                p, grad, state = real_views(p, grad, state)
                state_sum, step_t = state["sum"], state["step"]
                step_t.add_(1)
                step = _get_value(step_t)
                if weight_decay != 0:
                    if grad.is_sparse:
                        raise RuntimeError("weight_decay option is not compatible with sparse "
                                           "gradients")
                    grad = grad.add(p, alpha=weight_decay)
                clr = _div(lr, 1 + (step - 1) * lr_decay, group, lr_decay < 0)
                if grad.is_sparse:      # (nn.Embedding(sparse=True)'s: PyTorch's sparse rule)
                    _sparse_update(p, grad, state_sum, clr, eps)
                    continue
                state_sum.addcmul_(grad, grad, value=1)
                std = state_sum.sqrt().add_(eps)
                _addcdiv_(p, grad, std, -clr)
        return loss


def _sparse_update(p, grad, state_sum, clr, eps):
    """PyTorch's Adagrad update for a sparse gradient: the sum and the parameter change at
    the gradient's entries only (coalesced first: the update is not linear)."""
    grad = grad.coalesce()
    indices, values, size = grad._indices(), grad._values(), grad.size()
    state_sum.add_(sparse_coo_tensor(indices, values.pow(2), size))
    std_values = state_sum.sparse_mask(grad)._values().sqrt_().add_(eps)
    p.add_(sparse_coo_tensor(indices, values / std_values, size), alpha=-clr)
