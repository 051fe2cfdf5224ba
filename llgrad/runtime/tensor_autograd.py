"""Tensor's autograd interface: grad_fn (a view's regenerated after its base was written in
place), is_leaf, .grad, retain_grad, hooks, backward. Attached to Tensor here, above the
autograd nodes and engine it reaches (tensor.py is below them)."""
from __future__ import annotations
import sys
import warnings
import weakref
from typing import TYPE_CHECKING

from . import dtypes, trace_state
from .autograd_api import backward as autograd_backward
from .copy_slices import creation_error, multi_view_error, regenerate_view_grad_fn
from .dispatch import scalar_type_name
from .hook_handle import _Handle, _register
from .node import accumulate_node
from .saved_tensor import _internal
from .tensor import Tensor

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence


def _grad_fn(self):
    """The autograd node that made this tensor (PyTorch's node names, e.g. MulBackward0), or
    None for a leaf, as torch.Tensor.grad_fn."""
    if self._base is not None and self._view_version != self._storage.version:
        if self._creation is not None:
            if self._grad_fn is None and not self._base.requires_grad:
                return None
            raise creation_error(self, rebase=True)
        if self._multi_view and self._base.requires_grad:
            raise multi_view_error(self, rebase=True)
        regenerate_view_grad_fn(self)
    fn = self._grad_fn
    tracer = trace_state.state.tracer
    if tracer is not None and fn is not None and not _internal[sys._getframe(1).f_code.co_filename]:
        tracer.reads_layout(self, "Tensor.grad_fn")   # (an input's node: not in the guards)
    return fn


def _is_leaf(self):
    """Whether the tensor has no grad_fn (a leaf of the autograd graph), as
    torch.Tensor.is_leaf."""
    return self.grad_fn is None


def _get_grad(self):
    """The gradient accumulated by backward (None until then), as torch.Tensor.grad. A
    function compiled by llgrad.compile that reads .grad is keyed on it (its guards include
    the .grad it saw)."""
    if trace_state.grad_of(self) is None and not self.is_leaf and not self._retains_grad:
        warnings.warn("The .grad attribute of a Tensor that is not a leaf Tensor is being "
                      "accessed. Its .grad attribute won't be populated during "
                      "autograd.backward(). If you indeed want the .grad field to be "
                      "populated for a non-leaf Tensor, use .retain_grad() on the non-leaf "
                      "Tensor. If you access the non-leaf Tensor by mistake, make sure you "
                      "access the leaf Tensor instead. See github.com/pytorch/pytorch/pull/30531 "
                      "for more information.", UserWarning, stacklevel=2)
    return self._grad


def _set_grad(self, value):
    if value is not None:
        if not isinstance(value, Tensor):
            raise TypeError(f"assigned grad expected to be a Tensor or None but got grad "
                            f"of type {type(value).__name__}")
        want = self._dtype if self._grad_dtype is False else self._grad_dtype
        if want is not None and value._dtype is not want:       # (PyTorch's words)
            raise RuntimeError(
                f"attempting to assign a gradient with dtype '{dtypes.C_NAMES[value._dtype.name]}' to "
                f"a tensor with grad_dtype '{scalar_type_name(want)}'. The gradient "
                "must match the tensor's grad_dtype (defaults to the tensor's dtype). You can "
                "set the tensor's grad_dtype attribute with a specific dtype, or None to allow "
                "any dtype. Set grad_dtype with caution. Diverging the dtypes of a tensor and "
                "its gradient may break downstream systems that assume they match.")
        if value._data.shape != self._data.shape:
            raise RuntimeError(f"attempting to assign a gradient of size "
                               f"'{list(value._data.shape)}' to a tensor of size "
                               f"'{list(self._data.shape)}'. Please ensure that the gradient "
                               "and the tensor are the same size")
    tracer = trace_state.state.tracer
    if tracer is not None and value is None:   # (None over None: a clear calls must repeat)
        tracer.grad_cleared.add(id(self))
    self._grad = value


def _retains_grad(self):
    """Whether retain_grad() was called on this non-leaf tensor, as
    torch.Tensor.retains_grad."""
    if trace_state.state.tracer is not None and self._grad_fn is not None:
        trace_state.state.tracer.reads_layout(self, "Tensor.retains_grad")    # (not guarded)
    return self._retains_grad


def retain_grad(self) -> None:
    """Populate .grad of this non-leaf tensor during backward, as torch.Tensor.retain_grad
    (inside llgrad.compile the call runs eagerly)."""
    if not self.requires_grad:
        raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
    if self.is_leaf:
        return
    if self._retains_grad:
        return
    tracer = trace_state.state.tracer
    if tracer is not None:
        # (on a tensor the traced run made: its backward fills it, as a hook made inside
        # runs, and compiled calls give its .grad back: compile/retained.py)
        if self._grad_fn._seq < tracer.first_node:
            tracer.graph_break("retain_grad() inside the compiled function on a tensor made "
                               "before the call")
    fn = self.grad_fn
    fn._retained = fn._retained or {}
    fn._retained[self._output_nr] = weakref.ref(self)
    self._retains_grad = True


def register_hook(self, hook: Callable[[Tensor], Tensor | None]) -> _Handle:
    """hook(grad) -> Tensor or None, run when the gradient of this tensor is computed;
    returns a handle with remove(), as torch.Tensor.register_hook. Hooks on a compiled
    function's inputs run when its compiled backward reaches them."""
    if not self.requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require "
                           "gradient")
    if self.is_leaf:
        # (a dict under a fresh key, in registration order: a handle removes its own
        # registration, not every registration of the same function)
        if self._hooks is None:
            self._hooks = {}
        return _register(self._hooks, hook)
    return self.grad_fn._add_pre_hook(self._output_nr, hook)


def register_post_accumulate_grad_hook(self, hook: Callable[[Tensor], None]) -> _Handle:
    """hook(leaf) -> None, run after backward has added into this leaf's .grad."""
    if not self.requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require "
                           "gradient")
    if self.grad_fn is not None:
        raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf "
                           "tensors")
    return accumulate_node(self)._add_post_accumulate_hook(hook)


def backward(self, gradient: Tensor | None = None, retain_graph: bool | None = None,
             create_graph: bool = False, inputs: Tensor | Sequence[Tensor] | None = None) -> None:
    """Accumulate the gradients of this tensor into the leaves' .grad, as
    torch.Tensor.backward."""
    autograd_backward(self, gradient, retain_graph, create_graph, inputs=inputs)


def detach_(self) -> Tensor:
    """Drop this tensor's autograd history in place, as torch.Tensor.detach_ (not for
    views)."""
    if self._base is not None:
        raise RuntimeError(
            "Can't detach views in-place. Use detach() instead. If you are using "
            "DistributedDataParallel (DDP) for training, and gradient_as_bucket_view is set "
            "as True, gradients are views of DDP buckets, and hence detach_() cannot be called "
            "on these gradients. To fix this error, please refer to the Optimizer.zero_grad() "
            "function in torch/optim/optimizer.py as the solution.")
    self._grad_fn = None
    self._requires_grad = False
    return self


def _get_grad_dtype(self):
    """The dtype a leaf's .grad takes (its own dtype unless set; None: the incoming
    gradient's), as torch.Tensor.grad_dtype."""
    if self.grad_fn is not None:
        raise RuntimeError("grad_dtype can only be accessed on leaf tensors.")
    return self._dtype if self._grad_dtype is False else self._grad_dtype


def _set_grad_dtype(self, value):
    if self.grad_fn is not None:
        raise RuntimeError("grad_dtype can only be set on leaf tensors.")
    if value is not None and not isinstance(value, dtypes.dtype):
        raise RuntimeError(f"grad_dtype must be a torch.dtype or None, but got "
                           f"{type(value).__name__}")
    self._grad_dtype = value      # (AccumulateGrad casts each gradient to it)


Tensor._grad_dtype = False        # (the class's: the tensor's own dtype; an instance's own when set)
Tensor.grad_dtype = property(_get_grad_dtype, _set_grad_dtype)
Tensor.grad_fn = property(_grad_fn)
Tensor.is_leaf = property(_is_leaf)
Tensor.grad = property(_get_grad, _set_grad, lambda self: _set_grad(self, None))  # (del t.grad)


def _no_delete(message):
    def refuse(self):
        raise RuntimeError(message)
    return refuse


# (PyTorch's errors for del t.data, del t.requires_grad)
Tensor.data = Tensor.data.deleter(_no_delete("Deleting tensor data is not allowed. Delete "
                                             "tensor instead!"))
Tensor.requires_grad = Tensor.requires_grad.deleter(_no_delete("requires_grad must be a bool"))
Tensor.retains_grad = property(_retains_grad)
for _f in (retain_grad, register_hook, register_post_accumulate_grad_hook, backward, detach_):
    setattr(Tensor, _f.__name__, _f)
