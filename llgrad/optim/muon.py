"""Muon (torch.optim.Muon): momentum SGD on 2-D parameters whose update is orthogonalised
by a quintic Newton-Schulz iteration, with decoupled weight decay and a shape-dependent
learning-rate adjustment.

PyTorch runs the iteration in bfloat16, which llgrad's compiled code has not: the values are
kept in float32 rounded to bfloat16 after every operation PyTorch rounds (the cast, the
norm, the division, each matrix product with its scaled sum), which gives PyTorch's
bfloat16 numbers; the rounding is elementwise float arithmetic (exponent by log2 and exp2,
corrected by comparisons, then a half-to-even round of the scaled value), so a step
compiles."""
from __future__ import annotations
import math


from ..ir.bfloat16 import round_number
from ..runtime.functions import where
from ..runtime.grad_mode import enable_grad, no_grad
from ..runtime.hypers import hyper, raw
from ..runtime.tensor import Tensor
from .optimizer import LrT, Optimizer, ParamsT, _as_number

__all__ = ["Muon"]

EPS = 1e-7
DEFAULT_A = 3.4445
DEFAULT_B = -4.7750
DEFAULT_C = 2.0315
DEFAULT_NS_STEPS = 5


def _bf16(x):
    """x (float32) rounded to the nearest bfloat16 (ties to even), kept in float32."""
    a = x.abs()
    ok = a.isfinite() & (a != 0)
    e = where(ok, a, 1.0).log2().floor()
    s = e.exp2()
    e = where(a < s, e - 1, where(a >= 2 * s, e + 1, e))
    ulp = (e.clamp(min=-126) - 7).exp2()       # 8 significant bits; subnormals below 2^-126
    return where(ok, (x / ulp).round() * ulp, x)


def _zeropower_via_newtonschulz(grad, ns_coefficients, ns_steps, eps):
    """PyTorch's quintic Newton-Schulz orthogonalisation of a 2-D gradient, in bfloat16."""
    if ns_steps >= 100:
        raise ValueError("Number of steps must be less than 100 for computational efficiency")
    if len(grad.shape) != 2:
        raise ValueError("Input tensor gradient must be a 2D matrix")
    if len(ns_coefficients) != 3:
        raise ValueError("Coefficients must be a tuple of exactly 3 values")
    a, b, c = ns_coefficients
    x = _bf16(grad.float())
    tall = grad.size(0) > grad.size(1)
    if tall:
        x = x.T
    x = _bf16(x / _bf16(x.norm()).clamp(min=round_number(eps)))
    for _ in range(ns_steps):
        gram = _bf16(x @ x.T)
        update = _bf16(gram.addmm(gram, gram, beta=b, alpha=c))
        x = _bf16(x.addmm(update, x, beta=a))
    return x.T if tall else x


def _adjust_lr(lr, adjust_lr_fn, param_shape):
    """The learning rate scaled for the parameter's shape (PyTorch's two rules)."""
    A, B = param_shape[:2]
    if adjust_lr_fn is None or adjust_lr_fn == "original":
        ratio = math.sqrt(max(1, A / B))
    elif adjust_lr_fn == "match_rms_adamw":
        ratio = 0.2 * math.sqrt(max(A, B))
    else:
        ratio = 1.0
    return lr * ratio


class Muon(Optimizer):
    """Muon, as torch.optim.Muon (2-D parameters only): buf = lerp(buf, grad, 1 - momentum),
    the update (Nesterov: lerp(grad, buf, momentum)) orthogonalised by Newton-Schulz, then
    p *= 1 - lr * weight_decay and p -= adjusted lr * update. A compiled step reads lr and
    momentum at each call (OneCycleLR and CyclicLR cycle the momentum: no trace per value)."""
    dynamic_hypers = ("lr", "momentum")

    def __init__(self, params: ParamsT, lr: LrT = 1e-3, weight_decay: float = 0.1,
                 momentum: float = 0.95, nesterov: bool = True,
                 ns_coefficients: tuple[float, float, float] = (DEFAULT_A, DEFAULT_B, DEFAULT_C),
                 eps: float = EPS, ns_steps: int = DEFAULT_NS_STEPS,
                 adjust_lr_fn: str | None = None) -> None:
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not 0.0 <= momentum:
            raise ValueError(f"momentum should be >= 0 but is: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"weight decay should be >= 0 but is: {weight_decay}")
        if adjust_lr_fn is not None and adjust_lr_fn not in ("original", "match_rms_adamw"):
            raise ValueError(f"Adjust learning rate function {adjust_lr_fn} is not supported")
        defaults = dict(lr=lr, weight_decay=weight_decay, momentum=momentum, nesterov=nesterov,
                        ns_coefficients=ns_coefficients, eps=eps, ns_steps=ns_steps,
                        adjust_lr_fn=adjust_lr_fn)
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                if p.ndim != 2:
                    raise ValueError("Muon only supports 2D parameters whereas we found a "
                                     f"parameter with size: {p.size()}")

    @no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr = hyper(group, "lr")     # (while tracing, a graph input)
            lr_input = lr is not raw(group, "lr")
            if isinstance(lr, Tensor) and not lr_input and lr.dim():
                lr = lr.squeeze()
            weight_decay, momentum = group["weight_decay"], hyper(group, "momentum")
            # (the group's buffers are made before any parameter is written, and a complex
            # parameter refused there, as PyTorch's _init_group)
            todo = []
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.is_complex():
                    raise RuntimeError("Muon does not support complex parameters")
                state = self.state[p]
                if "momentum_buffer" not in state:
                    state["momentum_buffer"] = p.grad.new_zeros(p.grad.shape)
                todo.append((p, state["momentum_buffer"]))
            for p, buf in todo:
                grad = p.grad
                if grad.ndim != 2:
                    raise ValueError("Param gradient must be a 2D matrix")
                # (a traced momentum cast to the buffer's dtype first, as eager's number is)
                buf.lerp_(grad, _as_number(1 - momentum, buf))
                update = grad.lerp(buf, _as_number(momentum, grad)) if group["nesterov"] \
                    else buf
                update = _zeropower_via_newtonschulz(update, group["ns_coefficients"],
                                                     group["ns_steps"], group["eps"])
                adjusted = _adjust_lr(lr, group["adjust_lr_fn"], p.shape)
                p.mul_(1 - lr * weight_decay)
                p.add_(update.to(p.dtype), alpha=-adjusted)
        return loss
