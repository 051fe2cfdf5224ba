"""llgrad.autograd.functional: torch.autograd.functional's jacobian and hessian over
llgrad.func's jacrev / hessian (inputs a tensor or a tuple of tensors, results shaped
output.shape + input.shape, nested as PyTorch nests them)."""
from .func.jacobians import hessian as _hessian, jacrev as _jacrev
from .runtime.tensor import Tensor


def _detach(r, keep):
    if isinstance(r, tuple):
        return tuple(_detach(x, keep) for x in r)
    return r if keep or not isinstance(r, Tensor) else r.detach()


def _call(transform, func, inputs, create_graph):
    if isinstance(inputs, Tensor):
        return _detach(transform(func, 0)(inputs), create_graph)
    inputs = tuple(inputs)
    return _detach(transform(func, tuple(range(len(inputs))))(*inputs), create_graph)


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False,
             strategy="reverse-mode"):
    """As torch.autograd.functional.jacobian (by reverse mode; strict and vectorize are
    accepted and change nothing)."""
    if strategy not in ("reverse-mode", "forward-mode"):
        raise ValueError('Expected strategy to be either "forward-mode" or "reverse-mode". '
                         "Hint: If your function has more outputs than inputs, "
                         '"forward-mode" tends to be more performant. Otherwise, prefer to '
                         'use "reverse-mode".')
    return _call(_jacrev, func, inputs, create_graph)


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False,
            outer_jacobian_strategy="reverse-mode"):
    """As torch.autograd.functional.hessian (func returns a one-element tensor)."""
    return _call(_hessian, func, inputs, create_graph)
