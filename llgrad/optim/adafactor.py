"""Adafactor (Shazeer and Stern) with PyTorch's single-tensor update rule (torch.optim.
Adafactor; state: step, and row_var / col_var for a parameter of 2+ dims (the second moment
factored over the last two), variance for a vector). PyTorch reads the step count and two
norms out with item(); while a trace records they stay float64 tensors (_get_value's rule),
so a compiled step does not specialise on them."""
from __future__ import annotations
from ..runtime.creation import zeros_like
from ..runtime.dtype_info import finfo
from ..runtime.grad_mode import enable_grad, no_grad
from ..runtime.tensor import Tensor
from .optimizer import LrT, ParamsT
from .optimizer import Optimizer, _add_scaled_, _get_value, _lr, _tracing
from ._state import new_step, tensor_steps

__all__ = ["Adafactor"]


class Adafactor(Optimizer):
    """Adafactor(params, lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0,
    weight_decay=0.0, *, foreach=None, maximize=False): PyTorch's rule and defaults."""
    dynamic_hypers = ("lr",)

    def __init__(self, params: ParamsT, lr: LrT = 1e-2, beta2_decay: float = -0.8,
                 eps: tuple[float | None, float] = (None, 1e-3), d: float = 1.0,
                 weight_decay: float = 0.0, *, foreach: bool | None = None,
                 maximize: bool = False) -> None:
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 >= beta2_decay:
            raise ValueError(f"beta2_decay should be <= 0 but is: {beta2_decay}")
        if eps[0] is not None and not 0.0 <= eps[0]:
            raise ValueError(f"epsilon1 should be >= 0 but is: {eps[0]}")
        if not 0.0 <= eps[1]:
            raise ValueError(f"epsilon2 should be >= 0 but is: {eps[1]}")
        if not 1.0 <= d:
            raise ValueError(f"Clipping threshold d should be >= 1 but is: {d}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight_decay should be >= 0 but is: {weight_decay}")
        defaults = dict(lr=lr, beta2_decay=beta2_decay, eps=eps, d=d,
                        weight_decay=weight_decay, foreach=foreach, maximize=maximize)
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("foreach", None)
        tensor_steps(self)

    @no_grad()
    def step(self, closure=None):
        """One Adafactor step over every parameter that has a gradient; returns closure()."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr = _lr(group)
            eps1, eps2 = group["eps"]
            # (the group's states are made before any parameter is written, and a complex
            # parameter refused there, as PyTorch's _init_group)
            todo = []
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.is_complex():
                    raise RuntimeError("Adafactor does not support complex parameters")
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = new_step()
                    if p.grad.dim() > 1:
                        state["row_var"] = p.grad.new_zeros(list(p.grad.shape[:-1]) + [1])
                        shape = list(p.grad.shape)
                        shape[-2] = 1
                        state["col_var"] = p.grad.new_zeros(shape)
                    else:
                        state["variance"] = zeros_like(p.grad)
                todo.append((p, state))
            for p, state in todo:
                _update(p, state, lr, group, eps1, eps2)
        return loss


def _update(param, state, lr, group, eps1, eps2):
    grad = -param.grad if group["maximize"] else param.grad
    if eps1 is None:
        eps1 = finfo(param.dtype).eps
    step_t = state["step"]
    step_t += 1
    step = _get_value(step_t)
    one_minus_beta2_t = step ** group["beta2_decay"]
    traced = _tracing()
    if traced:      # (min/max of numbers as tensor ops; the norms stay in the graph)
        rho_t = (1 / step ** 0.5).clamp(max=lr)
        alpha = (param.norm(2).double() / (param.numel() ** 0.5)).clamp(min=eps2) * rho_t
        one_minus_beta2_t = one_minus_beta2_t.to(param.dtype)
    else:
        rho_t = min(lr, 1 / (step ** 0.5))
        alpha = max(eps2, param.norm(2).item() / (param.numel() ** 0.5)) * rho_t
    if group["weight_decay"] != 0:
        param.mul_(1 - lr * group["weight_decay"])
    if grad.dim() > 1:
        row_var, col_var = state["row_var"], state["col_var"]
        row_mean = grad.norm(dim=-1, keepdim=True).square_().div_(grad.size(-1))
        row_var.lerp_(row_mean, one_minus_beta2_t)
        col_mean = grad.norm(dim=-2, keepdim=True).square_().div_(grad.size(-2))
        col_var.lerp_(col_mean, one_minus_beta2_t)
        var_estimate = row_var @ col_var
        var_estimate.div_(row_var.mean(dim=-2, keepdim=True).clamp_(min=eps1))
    else:
        variance = state["variance"]
        variance.lerp_(grad * grad, one_minus_beta2_t)
        var_estimate = variance.clone()
    update = var_estimate.clamp_(min=eps1 * eps1).rsqrt_()
    update.mul_(grad)
    scale = (update.numel() ** 0.5) * group["d"]
    if traced:
        denom = (update.norm(2).double() / scale).clamp(min=1.0)
    else:
        denom = max(1.0, update.norm(2).item() / scale)
    _add_scaled_(param, update, -alpha / denom)
