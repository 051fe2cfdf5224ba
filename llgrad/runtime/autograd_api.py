"""backward() and autograd.grad(): argument handling around the engine."""
from __future__ import annotations

import itertools
import threading
import warnings
from collections import namedtuple
from typing import TYPE_CHECKING

from . import backward_run, dispatch, trace_state
from .autocast_cast import suspended as autocast_suspended
from .creation import zeros_like
from .engine import run_backward
from .root_grads import make_root_grads
from .functions_settings import warn_once
from .meta_tensor import is_meta, no_data_error
from .tensor import Tensor

if TYPE_CHECKING:
    from collections.abc import Sequence


class _Tasks(threading.local):
    def __init__(self):
        # per backward running on this thread (PyTorch's graph tasks): [id, whether it is
        # partial, callbacks to run when it ends]
        self.running = []


_tasks = _Tasks()
_task_ids = itertools.count()


def _is_checkpoint_valid():
    """Whether the backward running now reaches every leaf (not autograd.grad, not
    backward(inputs=...)): what a reentrant checkpoint needs, as
    torch.autograd._is_checkpoint_valid."""
    return not _tasks.running or not _tasks.running[-1][1]


def current_graph_task_id():
    """The id of the backward running now on this thread, -1 outside one (PyTorch's
    torch._C._current_graph_task_id)."""
    return _tasks.running[-1][0] if _tasks.running else -1


def queue_callback(fn):
    """Run fn() when the backward running now has finished its nodes (PyTorch's
    Variable._execution_engine.queue_callback)."""
    if not _tasks.running:
        raise RuntimeError("Final callbacks can only be installed during backward pass.")
    _tasks.running[-1][2].append(fn)


def _run(partial, *args):
    task = [next(_task_ids), partial, []]
    _tasks.running.append(task)
    run = backward_run.current
    prev, run.now = run.now, backward_run.next_number()    # (what it releases notes it)
    try:
        with autocast_suspended():          # (PyTorch's backward runs without autocast)
            res = run_backward(*args)
        while task[2]:              # (a callback may queue another)
            task[2].pop(0)()
        return res
    finally:
        _tasks.running.pop()
        run.now = prev


GradientEdge = namedtuple("GradientEdge", ["node", "output_nr"])
GradientEdge.__doc__ = "Where a tensor's gradient goes: (backward node, its input number)."


class TensorEdge(GradientEdge):
    """The GradientEdge of a tensor (autograd.graph.get_gradient_edge), which keeps the
    tensor's shape and dtype: as an output of grad / backward, the gradient it gets by
    default, or must match (PyTorch reads them off the node)."""

    def __new__(cls, edge, tensor):
        self = super().__new__(cls, *edge)
        self.meta = (tensor._data.shape, tensor._dtype)
        return self


TensorEdge.__name__ = TensorEdge.__qualname__ = "GradientEdge"     # (its repr: PyTorch's)


def _seq(x):
    if x is None:
        return None
    return [x] if isinstance(x, (Tensor, GradientEdge)) else list(x)


def _check_outputs(outputs):
    for t in outputs:       # (PyTorch's AssertionError, not an AttributeError from the engine)
        if not isinstance(t, (Tensor, GradientEdge)):
            raise AssertionError(f"Expected output to be a llgrad.Tensor, but got "
                                 f"{type(t).__name__}")


def _check_inputs(inputs):
    for t in inputs:        # (PyTorch's RuntimeError, not an AttributeError from the engine)
        if not isinstance(t, (Tensor, GradientEdge)):
            raise RuntimeError(f"all inputs have to be Tensors or GradientEdges, but got "
                               f"{type(t).__name__}")


def backward(tensors: Tensor | Sequence[Tensor],
             grad_tensors: Tensor | Sequence[Tensor | None] | None = None,
             retain_graph: bool | None = None, create_graph: bool = False,
             grad_variables: None = None, inputs: Tensor | Sequence[Tensor] | None = None) -> None:
    """Accumulate the gradients of tensors into the leaves' .grad (or only into inputs when
    given), as torch.autograd.backward."""
    if trace_state.state.func_transforms:
        raise RuntimeError("backward() called inside a functorch transform. This is not "
                           "supported, please use functorch.grad or functorch.vjp instead or "
                           "call backward() outside of functorch transforms.")
    tensors = _seq(tensors)
    _check_outputs(tensors)
    grads = [None] * len(tensors) if grad_tensors is None else _seq(grad_tensors)
    if len(grads) < len(tensors):       # (PyTorch's words)
        raise RuntimeError(f"got {len(tensors)} tensors and {len(grads)} gradients")
    for g in grads[:len(tensors)]:      # (PyTorch's order: each one's type, then the count)
        if g is not None and not isinstance(g, Tensor):
            raise TypeError(f"gradients can be either Tensors or None, but got "
                            f"{type(g).__name__}")
    if len(grads) != len(tensors):
        raise RuntimeError(f"grad_tensors has {len(grads)} entries but tensors has "
                           f"{len(tensors)}")
    if retain_graph is None:
        retain_graph = create_graph
    if inputs is not None:
        inputs = _seq(inputs)
        if len(inputs) == 0:
            raise RuntimeError("`inputs` argument to `backward()` cannot be empty.")
        _check_inputs(inputs)
    if create_graph:
        warn_once("backward_create_graph", "Using backward() with create_graph=True will "
                  "create a reference cycle between the parameter and its gradient which can "
                  "cause a memory leak. We recommend using autograd.grad when creating the "
                  "graph to avoid this. If you have to use this function, make sure to reset "
                  "the .grad fields of your parameters to None after use to break the cycle "
                  "and avoid the leak.")
    root_grads = make_root_grads(tensors, grads)
    if inputs is not None and trace_state.state.tracer is None:
        for t in inputs:    # (PyTorch's engine: each input retains its gradient)
            if isinstance(t, Tensor):
                t.retain_grad()
    _run(inputs is not None, tensors, root_grads, retain_graph, create_graph, inputs, True)


def grad(outputs: Tensor | Sequence[Tensor], inputs: Tensor | Sequence[Tensor],
         grad_outputs: Tensor | Sequence[Tensor | None] | None = None,
         retain_graph: bool | None = None, create_graph: bool = False, only_inputs: bool = True,
         allow_unused: bool | None = None, is_grads_batched: bool = False,
         materialize_grads: bool = False) -> tuple[Tensor | None, ...]:
    """The gradients of outputs with respect to inputs, returned rather than accumulated, as
    torch.autograd.grad (create_graph=True for higher order)."""
    outputs, inputs = _seq(outputs), _seq(inputs)
    _check_outputs(outputs)
    grads = [None] * len(outputs) if grad_outputs is None else _seq(grad_outputs)
    if len(grads) < len(outputs):       # (PyTorch's check, after it drops extra ones)
        raise RuntimeError(f"got {len(outputs)} tensors and {len(grads)} gradients")
    if retain_graph is None:
        retain_graph = create_graph
    if not only_inputs:
        warnings.warn("only_inputs argument is deprecated and is ignored now (defaults to "
                      "True). To accumulate gradient for other parts of the graph, please use "
                      "torch.autograd.backward.", FutureWarning, stacklevel=2)
    if materialize_grads and allow_unused is False:
        raise ValueError("Expected allow_unused to be True or not passed when "
                         "materialize_grads=True, but got: allow_unused=False.")
    if allow_unused is None:
        allow_unused = materialize_grads
    if not inputs:
        raise RuntimeError("`inputs` argument to `grad()` cannot be empty.")
    _check_inputs(inputs)
    if is_grads_batched:
        return _batched_grad(outputs, inputs, grads, retain_graph, create_graph, allow_unused,
                             materialize_grads)
    res = _run(True, outputs, make_root_grads(outputs, grads), retain_graph, create_graph,
               inputs, False, allow_unused)
    if dispatch.meta is not None and any(   # (PyTorch copies a meta gradient to a CPU input)
            isinstance(t, Tensor) and g is not None and is_meta(g) and not is_meta(t)
            for g, t in zip(res, inputs)):
        raise no_data_error()
    if materialize_grads:
        if any(g is None and isinstance(t, GradientEdge) for g, t in zip(res, inputs)):
            raise RuntimeError("materialize_grads cannot be used when the given input is a "
                               "GradientEdge")
        # (PyTorch: zeros_like, the input's layout, requiring grad under create_graph)
        res = [g if g is not None else zeros_like(t, requires_grad=create_graph)
               for g, t in zip(res, inputs)]
    return tuple(res)


def _batched_grad(outputs, inputs, grads, retain_graph, create_graph, allow_unused,
                  materialize_grads):
    """grad with is_grads_batched: one backward per slice of the grad_outputs' first dim
    (PyTorch vmaps it), the input gradients stacked along a new first dim."""
    for i, (g, o) in enumerate(zip(grads, outputs)):
        if g is not None and tuple(g.shape[1:]) != tuple(o.shape):
            raise RuntimeError(
                "If `is_grads_batched=True`, we interpret the first dimension of each "
                "grad_output as the batch dimension. The sizes of the remaining dimensions are "
                "expected to match the shape of corresponding output, but a mismatch was "
                f"detected: grad_output[{i}] has a shape of llgrad.Size({list(g.shape[1:])}) "
                f"and output[{i}] has a shape of llgrad.Size({list(o.shape)}). If you only want "
                "some tensors in `grad_output` to be considered batched, consider using vmap.")
    given = [g for g in grads if g is not None]
    n = given[0]._data.shape[0] if given else 1
    per = [grad(outputs, inputs, [g if g is None else g[i] for g in grads],
                retain_graph or i < n - 1, create_graph, True, allow_unused,
                False, materialize_grads) for i in range(n)]
    return tuple(None if per[0][k] is None else
                 per[0][k]._op("stack", *[p[k] for p in per[1:]], dim=0)
                 for k in range(len(inputs)))
