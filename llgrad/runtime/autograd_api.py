"""backward() and autograd.grad(): argument handling around the engine."""
from __future__ import annotations

from typing import TYPE_CHECKING

from .engine import make_root_grads, run_backward
from .tensor import Tensor

if TYPE_CHECKING:
    from collections.abc import Sequence


def _seq(x):
    if x is None:
        return None
    return [x] if isinstance(x, Tensor) else list(x)


def backward(tensors: Tensor | Sequence[Tensor],
             grad_tensors: Tensor | Sequence[Tensor | None] | None = None,
             retain_graph: bool | None = None, create_graph: bool = False,
             grad_variables: None = None, inputs: Tensor | Sequence[Tensor] | None = None) -> None:
    """Accumulate the gradients of tensors into the leaves' .grad (or only into inputs when
    given), as torch.autograd.backward."""
    tensors = [tensors] if isinstance(tensors, Tensor) else _seq(tensors)
    grads = _seq(grad_tensors) or [None] * len(tensors)
    if len(grads) != len(tensors):
        raise RuntimeError(f"grad_tensors has {len(grads)} entries but tensors has "
                           f"{len(tensors)}")
    if retain_graph is None:
        retain_graph = create_graph
    if inputs is not None:
        inputs = _seq(inputs)
        if len(inputs) == 0:
            raise RuntimeError("`inputs` argument to `backward()` cannot be empty.")
    run_backward(tensors, make_root_grads(tensors, grads), retain_graph, create_graph,
                 inputs, True)


def grad(outputs: Tensor | Sequence[Tensor], inputs: Tensor | Sequence[Tensor],
         grad_outputs: Tensor | Sequence[Tensor | None] | None = None,
         retain_graph: bool | None = None, create_graph: bool = False, only_inputs: bool = True,
         allow_unused: bool | None = None, is_grads_batched: bool = False,
         materialize_grads: bool = False) -> tuple[Tensor | None, ...]:
    """The gradients of outputs with respect to inputs, returned rather than accumulated, as
    torch.autograd.grad (create_graph=True for higher order)."""
    outputs = [outputs] if isinstance(outputs, Tensor) else _seq(outputs)
    inputs = [inputs] if isinstance(inputs, Tensor) else _seq(inputs)
    grads = _seq(grad_outputs) or [None] * len(outputs)
    if retain_graph is None:
        retain_graph = create_graph
    if allow_unused is None:
        allow_unused = materialize_grads
    if not inputs:
        raise RuntimeError("`inputs` argument to `grad()` cannot be empty.")
    for t in inputs:
        if not isinstance(t, Tensor):
            raise TypeError("grad(): inputs must be Tensors")
    res = run_backward(outputs, make_root_grads(outputs, grads), retain_graph, create_graph,
                       inputs, False, allow_unused)
    if materialize_grads:
        res = [g if g is not None else t.new_zeros(t.shape) for g, t in zip(res, inputs)]
    return tuple(res)
