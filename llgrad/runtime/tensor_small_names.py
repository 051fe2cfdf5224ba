"""Small Tensor and torch.* names scripts meet: as_strided_ (self rebound to a strided view of
its storage), dim_order, const_data_ptr, is_distributed, _is_view, mvlgamma_, the removed volatile
flag (False, with PyTorch's warning), torch.cond (eager: the branch pred picks) and
init_num_threads."""
import warnings

from . import trace_state
from .functions import export
from .functions_math import make_inplace
from .functions_special import mvlgamma
from .symbolic_uses import check_layout
from .tensor import Tensor
from .user_frames import user_stacklevel


def as_strided_(self, size, stride, storage_offset=None):
    """As torch.Tensor.as_strided_: self becomes the view as_strided(size, stride,
    storage_offset) of its own storage (not for tensors that require grad)."""
    if self.requires_grad:
        if self._grad_fn is None:
            raise RuntimeError("a leaf Variable that requires grad is being used in an in-place "
                               "operation.")
        raise NotImplementedError("as_strided_ of a tensor that requires grad: llgrad cannot "
                                  "rebind its autograd history in place; use as_strided()")
    tracer = trace_state.state.tracer
    if tracer is not None:
        tracer.untraceable("as_strided_ (a change of a tensor's view in place)")
    view = self.as_strided(size, stride, storage_offset)
    self._data = view._data
    return self


def dim_order(self, *, ambiguity_check=False):
    """As torch.Tensor.dim_order: the dims from outermost to innermost in memory (by
    decreasing stride, ties in dim order)."""
    strides = self.stride()
    return tuple(sorted(range(len(strides)), key=lambda d: -strides[d]))


def const_data_ptr(self):
    """As torch.Tensor.const_data_ptr: data_ptr()."""
    return self.data_ptr()


def _is_view(self):
    """As torch.Tensor._is_view: whether self is a view of another tensor (has a _base)."""
    tracer = trace_state.state.tracer
    if tracer is not None:      # (of a copy standing for x[i]'s view: symbolic_uses.py)
        check_layout(tracer, self)
    return self._base is not None


def is_distributed(self):
    """As torch.Tensor.is_distributed: False."""
    return False


def _volatile(self):
    warnings.warn("volatile was removed (Variable.volatile is always False)", UserWarning,
                  stacklevel=user_stacklevel())
    return False


def cond(pred, true_fn, false_fn, operands=()):
    """As torch.cond: true_fn(*operands) if pred else false_fn(*operands); pred a bool or a
    one-element tensor (inside llgrad.compile its value becomes a guard)."""
    if isinstance(pred, Tensor) and pred.numel() != 1:
        raise RuntimeError(f"Expected pred to be bool or single-element tensor, but got "
                           f"{pred!r}.")
    return true_fn(*operands) if pred else false_fn(*operands)


def init_num_threads():
    """As torch.init_num_threads: nothing to initialise (llgrad.set_num_threads sets them)."""


for _f in (as_strided_, dim_order, const_data_ptr, is_distributed, _is_view):
    setattr(Tensor, _f.__name__, _f)
Tensor.volatile = property(_volatile, doc="False, with PyTorch's warning (volatile was "
                                          "removed).")
Tensor.mvlgamma_ = make_inplace(mvlgamma, "mvlgamma_")
export(as_strided_)
export(is_distributed)
export(cond)
export(init_num_threads)
