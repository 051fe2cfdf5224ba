"""llgrad.autograd.graph: torch.autograd.graph's saved-tensor hooks, the Node base class of
backward nodes and gradient edges."""

from ..runtime.autograd_api import (GradientEdge, TensorEdge, current_graph_task_id,
                                     queue_callback)
from ..runtime.node import Node, gradient_edge
from ..runtime.saved_hooks import (allow_mutation_on_saved_tensors,  # noqa: F401
                                   disable_saved_tensors_hooks, save_on_cpu,
                                   saved_tensors_hooks)

__all__ = ["Node", "GradientEdge", "get_gradient_edge", "increment_version",
           "saved_tensors_hooks", "save_on_cpu", "disable_saved_tensors_hooks",
           "register_multi_grad_hook", "allow_mutation_on_saved_tensors"]


def get_gradient_edge(tensor):
    """The GradientEdge of tensor (its grad_fn, or its AccumulateGrad for a leaf), as
    torch.autograd.graph.get_gradient_edge."""
    edge = gradient_edge(tensor)
    if edge is None:
        raise RuntimeError("It is not possible to get the gradient edge for a Tensor that "
                           "does not require gradients")
    return TensorEdge(edge, tensor)


def increment_version(tensor):
    """Bump the version counter of tensor's storage (as an in-place write would), as
    torch.autograd.graph.increment_version; a list or tuple of tensors bumps each."""
    for t in (tensor if isinstance(tensor, (list, tuple)) else (tensor,)):
        t._storage.version += 1


class _MultiHandle:
    """The handle of a multi-grad hook: remove() removes its hook on every tensor."""

    def __init__(self, handles):
        self.handles = handles

    def remove(self):
        for h in self.handles:
            h.remove()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def register_multi_grad_hook(tensors, fn, *, mode="all"):
    """As torch.autograd.graph.register_multi_grad_hook: mode "all" calls fn(grads) once per
    backward that computes a gradient of any of tensors (None for those it did not compute;
    llgrad calls it when that backward has run its nodes, PyTorch as soon as the last of
    them is computed); mode "any" calls fn(grad) with the first one computed."""
    supported_modes = ("all", "any")
    if mode not in supported_modes:
        raise ValueError(f"Expects mode to be one of {supported_modes} but got {mode}")
    n = len(tensors)
    if mode == "all":
        buffers = {}

        def inner_hook(i):
            def hook(grad):
                task = current_graph_task_id()
                if task not in buffers:
                    buffers[task] = [None] * n
                    queue_callback(lambda: fn(buffers.pop(task)))
                buffers[task][i] = grad
            return hook
        return _MultiHandle(tuple(t.register_hook(inner_hook(i))
                                  for i, t in enumerate(tensors)))
    ran = set()

    def wrapped(grad):
        task = current_graph_task_id()
        if task in ran:
            return
        ran.add(task)
        queue_callback(lambda: ran.discard(task))
        fn(grad)
    return _MultiHandle(tuple(t.register_hook(wrapped) for t in tensors if t.requires_grad))
