"""SparseAdam: Adam's moments and update at a sparse gradient's entries only, for the sparse
gradients of nn.Embedding(sparse=True) / nn.EmbeddingBag(sparse=True); PyTorch's rule, its
operations in its order (torch.optim._functional.sparse_adam)."""
from __future__ import annotations
import math

from ..runtime.creation import zeros_like
from ..runtime.functions_sparse import sparse_coo_tensor
from ..runtime.grad_mode import enable_grad, no_grad
from ..runtime.tensor import Tensor
from .optimizer import Optimizer, ParamsT, _to_scalar

__all__ = ["SparseAdam"]


class SparseAdam(Optimizer):
    """SparseAdam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, maximize=False), as
    torch.optim.SparseAdam: dense parameters with sparse gradients (a dense gradient raises)."""

    def __init__(self, params: ParamsT, lr: float | Tensor = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 maximize: bool = False) -> None:
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 < lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 < eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, maximize=maximize))
        sparse_params, complex_params = [], []
        for index, group in enumerate(self.param_groups):
            for d_index, p in enumerate(group["params"]):
                if p.is_sparse:
                    sparse_params.append([index, d_index])
                if p.is_complex():
                    complex_params.append([index, d_index])
        if sparse_params:
            raise ValueError(f"Sparse params at indices {sparse_params}: SparseAdam requires "
                             "dense parameter tensors")
        if complex_params:
            raise ValueError(f"Complex params at indices {complex_params}: SparseAdam does not "
                             "support complex parameters")

    @no_grad()
    def step(self, closure=None):
        """One step over every parameter with a gradient; returns closure()'s loss."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            todo = []
            for p in group["params"]:       # (every gradient checked before any update)
                if p.grad is None:
                    continue
                if not p.grad.is_sparse:
                    raise RuntimeError("SparseAdam does not support dense gradients, please "
                                       "consider Adam instead")
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = 0
                    state["exp_avg"] = zeros_like(p)
                    state["exp_avg_sq"] = zeros_like(p)
                state["step"] += 1
                todo.append((p, state))
            for p, state in todo:
                _update(p, p.grad, state, beta1, beta2, group["eps"], _to_scalar(group["lr"]),
                        group.get("maximize", False))
        return loss


def _update(param, grad, state, beta1, beta2, eps, lr, maximize):
    grad = (-grad if maximize else grad).coalesce()     # (not linear: unique indices)
    indices, values, size = grad._indices(), grad._values(), grad.size()
    if values.numel() == 0:
        return
    exp_avg, exp_avg_sq, step = state["exp_avg"], state["exp_avg_sq"], state["step"]

    def make_sparse(v):
        return sparse_coo_tensor(indices, v, size)
    # old <- b * old + (1 - b) * new, as old += (1 - b) * (new - old)
    old_exp_avg_values = exp_avg.sparse_mask(grad)._values()
    exp_avg_update_values = values.sub(old_exp_avg_values).mul_(1 - beta1)
    exp_avg.add_(make_sparse(exp_avg_update_values))
    old_exp_avg_sq_values = exp_avg_sq.sparse_mask(grad)._values()
    exp_avg_sq_update_values = values.pow(2).sub_(old_exp_avg_sq_values).mul_(1 - beta2)
    exp_avg_sq.add_(make_sparse(exp_avg_sq_update_values))
    numer = exp_avg_update_values.add_(old_exp_avg_values)
    exp_avg_sq_update_values.add_(old_exp_avg_sq_values)
    denom = exp_avg_sq_update_values.sqrt_().add_(eps)
    bias_correction1 = 1 - beta1 ** step
    bias_correction2 = 1 - beta2 ** step
    step_size = lr * math.sqrt(bias_correction2) / bias_correction1
    param.add_(make_sparse(-step_size * numer.div_(denom)))
