"""llgrad.autograd.graph: torch.autograd.graph's saved-tensor hooks, the Node base class of
backward nodes and gradient edges."""
from collections import namedtuple

from ..runtime.node import Node, gradient_edge
from ..runtime.saved_hooks import (disable_saved_tensors_hooks, save_on_cpu,  # noqa: F401
                                   saved_tensors_hooks)

__all__ = ["Node", "GradientEdge", "get_gradient_edge", "increment_version",
           "saved_tensors_hooks", "save_on_cpu", "disable_saved_tensors_hooks"]

GradientEdge = namedtuple("GradientEdge", ["node", "output_nr"])
GradientEdge.__doc__ = "Where a tensor's gradient goes: (backward node, its input number)."


def get_gradient_edge(tensor):
    """The GradientEdge of tensor (its grad_fn, or its AccumulateGrad for a leaf), as
    torch.autograd.graph.get_gradient_edge."""
    edge = gradient_edge(tensor)
    if edge is None:
        raise RuntimeError("It is not possible to get the gradient edge for a Tensor that "
                           "does not require gradients")
    return GradientEdge(*edge)


def increment_version(tensor):
    """Bump the version counter of tensor's storage (as an in-place write would), as
    torch.autograd.graph.increment_version; a list or tuple of tensors bumps each."""
    for t in (tensor if isinstance(tensor, (list, tuple)) else (tensor,)):
        t._storage.version += 1
