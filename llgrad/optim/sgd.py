"""SGD with momentum, dampening, weight decay, Nesterov momentum and maximize (PyTorch's
single-tensor update rule)."""
from __future__ import annotations
from ..runtime.grad_mode import enable_grad, no_grad
from ..runtime.hypers import hyper, raw
from . import _eager_sgd
from .optimizer import LrT, Optimizer, ParamsT, _check_lr, _for_loop_only, _made_once


class SGD(Optimizer):
    """Stochastic gradient descent with momentum, dampening, weight decay, Nesterov and
    maximize, as torch.optim.SGD (PyTorch's single-tensor update rule; with foreach=True,
    Nesterov's update leaves .grad as PyTorch's foreach rule does). A compiled step
    reads lr and momentum at each call (a schedule does not re-trace it)."""
    dynamic_hypers = ("lr", "momentum")

    def __init__(self, params: ParamsT, lr: LrT = 1e-3, momentum: float = 0, dampening: float = 0,
                 weight_decay: float = 0, nesterov: bool = False, *, maximize: bool = False,
                 foreach: bool | None = None, differentiable: bool = False,
                 fused: bool | None = None) -> None:
        _check_lr(lr, nan_ok=True)
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        _for_loop_only(fused=fused, foreach=foreach)
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening,
                        weight_decay=weight_decay, nesterov=nesterov, maximize=maximize,
                        foreach=foreach, differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            for k, v in (("nesterov", False), ("maximize", False), ("foreach", None),
                         ("differentiable", False), ("fused", False)):
                group.setdefault(k, v)

    @no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        for group in self.param_groups:
            # (while tracing, lr and momentum may be graph inputs: 0-d tensors, which add's
            # alpha takes as it takes the numbers: one fused multiply-add either way; cast
            # to the parameter's dtype first, as a number is, _as_number)
            lr, momentum, dampening = hyper(group, "lr"), hyper(group, "momentum"), \
                group["dampening"]
            weight_decay = group["weight_decay"]
            # the eager update without the dispatcher's bookkeeping where it applies
            # (_eager_sgd.py: the same ops, the same values and versions)
            # torch's foreach=True update adds Nesterov's momentum into .grad itself (its
            # grads are the user's tensors unless maximize or weight decay copied them)
            into_grad = group["foreach"] is True and group["nesterov"] and \
                weight_decay == 0 and not group["maximize"]
            fast = None if into_grad else _eager_sgd.settings(group)
            once = _made_once()     # (a traced hyper-parameter's cast, once per group)
            loc = _eager_sgd.where() if fast is not None else None
            # (a parameter listed twice whose buffer this step made: PyTorch read every
            # buffer before the updates, so its later entry makes a buffer of its own too,
            # the last one kept)
            made = set()
            for p in group["params"]:
                if p.grad is None:
                    continue
                if loc is not None and id(p) not in made and \
                        _eager_sgd.update(p, self.state, fast, loc):
                    continue
                grad = -p.grad if group["maximize"] else p.grad
                if weight_decay != 0:
                    grad = grad.add(p, alpha=weight_decay)
                if raw(group, "momentum") != 0:     # (zero or not: in the guard key)
                    state = self.state[p]
                    buf = state.get("momentum_buffer")
                    if buf is None or id(p) in made:
                        buf = state["momentum_buffer"] = grad.detach().clone()
                        made.add(id(p))
                    else:
                        buf.mul_(once("momentum", buf, lambda: momentum)).add_(
                            grad, alpha=1 - dampening)
                    if group["nesterov"]:
                        nesterov = grad.add_ if into_grad else grad.add
                        grad = nesterov(buf, alpha=once("momentum", buf, lambda: momentum))
                    else:
                        grad = buf
                p.add_(grad, alpha=once("-lr", p, lambda: -lr))
        return loss
