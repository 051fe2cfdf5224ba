"""Rprop (resilient backpropagation) and ASGD (averaged SGD), with PyTorch's single-tensor
update rules, defaults, checks and state layout."""
from __future__ import annotations
from ..runtime import trace_state
from ..runtime.creation import full_like, ones, tensor, zeros_like
from ..runtime.hypers import raw
from ..runtime.functions import where
from ..runtime.grad_mode import enable_grad, no_grad
from ..runtime.tensor import Tensor
from .optimizer import (LrT, Optimizer, ParamsT, _as_number, _check_lr, _get_value, _lr,
                        _to_scalar)
from ._state import new_step, tensor_steps, real_views

__all__ = ["Rprop", "ASGD"]


def _closure_loss(closure):
    if closure is None:
        return None
    with enable_grad():
        return closure()


class Rprop(Optimizer):
    """Rprop(params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), maximize=False): each
    element's step grows by etas[1] while its gradient keeps its sign and shrinks by etas[0]
    when it flips (that element then skips one update), as torch.optim.Rprop."""
    # (lr is read only when a parameter's state is made: a schedule changing it afterwards
    # changes nothing a compiled step computes, and must not make it trace again)
    dynamic_hypers = ("lr",)

    def __init__(self, params: ParamsT, lr: LrT = 1e-2, etas: tuple[float, float] = (0.5, 1.2),
                 step_sizes: tuple[float, float] = (1e-6, 50), *, capturable: bool = False,
                 foreach: bool | None = None, maximize: bool = False,
                 differentiable: bool = False) -> None:
        _check_lr(lr)
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        defaults = dict(lr=lr, etas=etas, step_sizes=step_sizes, foreach=foreach,
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
        """One Rprop step over every parameter that has a gradient; returns closure()."""
        loss = _closure_loss(closure)
        for group in self.param_groups:
            etaminus, etaplus = group["etas"]
            step_size_min, step_size_max = group["step_sizes"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = -p.grad if group["maximize"] else p.grad
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = new_step()
                    state["prev"] = zeros_like(p)
                    lr0 = _to_scalar(group["lr"])     # (a complex one's two parts each step)
                    state["step_size"] = full_like(grad, complex(lr0, lr0) if
                                                   p._dtype.is_complex else lr0)
                p, grad, state = real_views(p, grad, state)
                prev, step_size = state["prev"], state["step_size"]
                state["step"].add_(1)
                # (PyTorch's capturable form of the masked writes: the same values, and a
                # compiled step does not specialise on how many signs flipped)
                sign = grad.mul(prev).sign()
                sign = where(sign.gt(0), etaplus, sign)
                sign = where(sign.lt(0), etaminus, sign)
                sign = where(sign.eq(0), 1, sign)
                step_size.mul_(sign).clamp_(step_size_min, step_size_max)
                grad = where(sign.eq(etaminus), 0, grad)
                p.addcmul_(grad.sign(), step_size, value=-1)
                prev.copy_(grad)
        return loss


class ASGD(Optimizer):
    """ASGD(params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0): SGD with a
    decaying step eta and the running average `ax` of the iterates (averaging starts after t0
    steps), as torch.optim.ASGD."""
    dynamic_hypers = ("lr",)     # (a schedule's new lr is an input of a compiled step)

    def __init__(self, params: ParamsT, lr: LrT = 1e-2, lambd: float = 1e-4, alpha: float = 0.75,
                 t0: float = 1e6, weight_decay: float = 0, foreach: bool | None = None,
                 maximize: bool = False, differentiable: bool = False,
                 capturable: bool = False) -> None:
        _check_lr(lr)
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay,
                        foreach=foreach, maximize=maximize, differentiable=differentiable,
                        capturable=capturable)
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            for k, v in (("foreach", None), ("maximize", False), ("differentiable", False),
                         ("capturable", False)):
                group.setdefault(k, v)
        tensor_steps(self, ("step", "eta", "mu"))

    @no_grad()
    def step(self, closure=None):
        """One ASGD step over every parameter that has a gradient; returns closure()."""
        loss = _closure_loss(closure)
        for group in self.param_groups:
            lr, lambd, alpha, t0 = (_lr(group), group["lambd"], group["alpha"], group["t0"])
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = -p.grad if group["maximize"] else p.grad
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = new_step()
                    state["eta"] = lr.detach().clone().float() if isinstance(lr, Tensor) \
                        else new_step(lr)
                    state["mu"] = ones(())
                    state["ax"] = zeros_like(p)
                p, grad, state = real_views(p, grad, state)
                mu, ax, eta, step_t = state["mu"], state["ax"], state["eta"], state["step"]
                step_t.add_(1)
                if group["weight_decay"] != 0:
                    grad = grad.add(p, alpha=group["weight_decay"])
                eta_value = _get_value(eta)
                # (a traced eta, a float64 tensor, as the eager number: cast to p's dtype,
                # and alpha's one fused multiply-add)
                p.mul_(_as_number(1 - lambd * eta_value, p))
                p.add_(grad, alpha=-_as_number(eta_value, p))
                if trace_state.state.tracer is not None:
                    # (both branches as one select: mu's value, which changes every step
                    # after t0, is no guard of a compiled step)
                    ax.copy_(where(mu.ne(1), ax.add(p.sub(ax).mul_(mu)), p))
                elif mu.item() != 1:
                    ax.add_(p.sub(ax).mul_(mu))
                else:
                    ax.copy_(p)
                step = _get_value(step_t)
                base = 1 + lambd * lr * step
                if isinstance(base, Tensor) and not isinstance(raw(group, "lr"), Tensor):
                    _positive_base(base, lambd < 0 or raw(group, "lr") < 0)
                eta.copy_(_as_tensor(lr / base ** alpha))
                mu.copy_(_as_tensor(1 / _max1(step - t0)))
        return loss


def _as_tensor(x):
    return x if isinstance(x, Tensor) else tensor(x)


def _positive_base(base, possible):
    """base, a traced stand-in for the Python float the untraced step raises to alpha: a
    base that is not positive gives Python a complex power (eta takes its real part) or
    zero (lr / 0: ZeroDivisionError), a tensor's power nan or inf. The traced run breaks
    then (the call runs eagerly), and where a later call's can be so (`possible`: a
    negative lambd or lr), a guard sends it to a new trace (any guard costs a step)."""
    tracer = trace_state.state.tracer
    if tracer is None:
        return
    if not base._data.reshape(()).item() > 0:
        tracer.graph_break("ASGD's 1 + lambd * lr * step is not positive")
    if possible:
        tracer.guard(base > 0, True)


def _max1(x):
    return x.clamp(min=1) if isinstance(x, Tensor) else max(1, x)
