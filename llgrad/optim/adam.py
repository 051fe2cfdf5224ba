"""Adam (optionally AMSGrad, L2 or decoupled weight decay) and AdamW, with PyTorch's
single-tensor update rule: lerp_ and addcmul_ as PyTorch calls them; addcdiv_ composed of
in-place tensor ops (self + (value * t1) / t2), since a traced step's step size is a
tensor, not a number."""
from __future__ import annotations
from ..runtime.creation import tensor, zeros_like
from ..runtime.grad_mode import enable_grad, no_grad
from ..runtime.hypers import hyper, raw
from ..runtime.tensor import Tensor
from . import _eager_adam
from ._flags import fused_dtype_check
from ._state import real_views
from .optimizer import (LrT, Optimizer, ParamsT, _addcdiv_, _as_number, _div, _for_loop_only,
                        _get_value, _made_once)


class Adam(Optimizer):
    """Adam (amsgrad, weight_decay, decoupled_weight_decay, maximize), as torch.optim.Adam
    (PyTorch's single-tensor update rule; the step count is a tensor, so a compiled step
    does not re-trace as it grows; lr, betas and weight_decay are read at each call, so a
    schedule (DINO's of the weight decay) does not either)."""
    dynamic_hypers = ("lr", "betas", "weight_decay")

    def __init__(self, params: ParamsT, lr: LrT = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, amsgrad: bool = False, *,
                 foreach: bool | None = None, maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False, fused: bool | None = None,
                 decoupled_weight_decay: bool = False) -> None:
        if isinstance(lr, Tensor):
            if foreach and not capturable:
                raise ValueError("lr as a Tensor is not supported for capturable=False and "
                                 "foreach=True")
            if lr.numel() != 1:
                raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not (isinstance(betas[0], float) and isinstance(betas[1], float)
                or isinstance(betas[0], Tensor) and isinstance(betas[1], Tensor)):
            raise ValueError("betas must be either both floats or both Tensors")
        for i, b in enumerate(betas[:2]):
            if isinstance(b, Tensor):
                if not capturable and foreach:
                    raise ValueError(f"betas[{i}] as a Tensor is not supported for "
                                     "capturable=False and foreach=True")
                if b.numel() != 1:
                    raise ValueError(f"Tensor betas[{i}] must be 1-element")
        _for_loop_only(fused=fused, foreach=foreach)
        # PyTorch keeps a 1-element tensor beta as a 0-d one
        betas = tuple(b.squeeze() if isinstance(b, Tensor) and b.dim() else b for b in betas)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        amsgrad=amsgrad, maximize=maximize, foreach=foreach,
                        capturable=capturable, differentiable=differentiable, fused=fused,
                        decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            for k, v in (("amsgrad", False), ("maximize", False), ("foreach", None),
                         ("capturable", False), ("differentiable", False),
                         ("decoupled_weight_decay", False), ("fused", None)):
                group.setdefault(k, v)
            for p in group["params"]:
                s = self.state.get(p)
                if s and not isinstance(s["step"], Tensor):     # old format: a number
                    s["step"] = tensor(float(s["step"]))

    @no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        for group in self.param_groups:
            # (while tracing, lr and the betas may be graph inputs: 0-d tensors)
            _check_beta2(raw(group, "betas")[1])
            beta1, beta2 = hyper(group, "betas")
            lr, eps = hyper(group, "lr"), group["eps"]
            weight_decay = hyper(group, "weight_decay")
            b2_input = beta2 is not raw(group, "betas")[1] or isinstance(beta2, Tensor)
            # the eager update without the dispatcher's bookkeeping where it applies
            # (_eager_adam.py: the same ops, the same values and versions)
            plain = not group["differentiable"]
            loc = _eager_adam.where() if plain and _eager_adam.usable(group) else None
            once = _made_once()     # (a traced hyper-parameter's arithmetic, once per group)
            # the group's states made (and read) before any update, as PyTorch's _init_group:
            # amsgrad switched on after the first step raises its KeyError with nothing written
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if len(state) == 0:
                    if group["fused"]:
                        fused_dtype_check(p)
                    state["step"] = tensor(0.0, device="cpu")    # (as PyTorch's, on the CPU)
                    state["exp_avg"] = zeros_like(p)
                    state["exp_avg_sq"] = zeros_like(p)
                    if group["amsgrad"]:
                        state["max_exp_avg_sq"] = zeros_like(p)
                if group["amsgrad"]:
                    state["max_exp_avg_sq"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = -p.grad if group["maximize"] else p.grad
                p, grad, state = real_views(p, grad, self.state[p])
                if loc is not None and _eager_adam.update(p, grad, state, group, loc):
                    continue
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]

                state["step"].add_(1)
                if raw(group, "weight_decay") != 0:     # (the guard key holds whether)
                    if group["decoupled_weight_decay"]:
                        p.mul_(once("decay", p, lambda: 1 - lr * weight_decay))
                    else:
                        grad = grad.add(p, alpha=once("l2", p, lambda: weight_decay))

                # (_as_number: a traced hyper-parameter cast to the state's dtype first, as
                # the eager step's number is)
                exp_avg.lerp_(grad, once("1-beta1", exp_avg, lambda: 1 - beta1))
                if b2_input:        # (addcmul's order: value * t1 first)
                    exp_avg_sq.mul_(once("beta2", exp_avg_sq, lambda: beta2)).addcmul_(
                        grad.mul(once("1-beta2", grad, lambda: 1 - beta2)), grad)
                else:
                    exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)

                if not plain:       # (PyTorch's tensor arithmetic of the differentiable step)
                    _differentiable_update(p, state, group, lr, beta1, beta2, eps)
                    continue
                step = _get_value(state["step"])
                bias_correction1 = 1 - beta1 ** step
                bias_correction2_sqrt = (1 - beta2 ** step) ** 0.5
                step_size = _div(lr, bias_correction1, group, abs(raw(group, "betas")[0]) == 1)
                if group["amsgrad"]:
                    max_sq = state["max_exp_avg_sq"]
                    max_sq.copy_(max_sq.maximum(exp_avg_sq))
                    denom = (max_sq.sqrt() / _as_number(bias_correction2_sqrt, p)).add_(eps)
                else:
                    denom = (exp_avg_sq.sqrt() / _as_number(bias_correction2_sqrt, p)).add_(eps)
                # (addcdiv_, as PyTorch's: one rounding in bfloat16 / float16; composed where
                # step_size is a tensor, while tracing)
                _addcdiv_(p, exp_avg, denom, -step_size)
        return loss


def _check_beta2(beta2):
    """A beta2 edited into param_groups past [-1, 1] makes the bias correction
    1 - beta2 ** step negative (for beta2 > 1 at every step): its square root is a complex
    number, on which PyTorch's step fails by accident ("result type ComplexFloat can't be
    cast"), where the tensor arithmetic would write NaN weights. Checked once per group
    before anything is written (a compiled step's guard key tells such a beta apart, so it
    traces again and gets here: compile/guards.py)."""
    if isinstance(beta2, (int, float)) and abs(beta2) > 1:
        raise ValueError(f"Invalid beta parameter at index 1: {beta2} (the bias correction "
                         "1 - beta2 ** step would be negative)")


def _differentiable_update(p, state, group, lr, beta1, beta2, eps):
    """PyTorch's update of a differentiable (or capturable) step: the bias corrections
    from the step tensor, step_size folded into the denominator. (Parameters that require
    grad are refused before, optim._flags.)"""
    step = state["step"]
    step_size_neg = (lr / (1 - beta1 ** step)).neg()
    sq = state["exp_avg_sq"]
    if group["amsgrad"]:
        state["max_exp_avg_sq"].copy_(state["max_exp_avg_sq"].maximum(sq))
        sq = state["max_exp_avg_sq"]
    denom = (sq.sqrt() / ((1 - beta2 ** step).sqrt() * step_size_neg)).add_(eps / step_size_neg)
    p.addcdiv_(state["exp_avg"], denom)


class AdamW(Adam):
    """Adam with decoupled weight decay (p *= 1 - lr * weight_decay before the update)."""

    def __init__(self, params: ParamsT, lr: LrT = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 1e-2, amsgrad: bool = False, *,
                 maximize: bool = False, foreach: bool | None = None, capturable: bool = False,
                 differentiable: bool = False, fused: bool | None = None) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach,
                         maximize=maximize, capturable=capturable,
                         differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group["decoupled_weight_decay"] = True
