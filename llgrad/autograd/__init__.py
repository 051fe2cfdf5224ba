"""llgrad.autograd: PyTorch's autograd namespace (re-exports), with the submodules function,
functional, graph and profiler importable by their dotted names."""
import warnings

from ..runtime.autograd_api import _is_checkpoint_valid, backward, grad  # noqa: F401
from . import function  # noqa: F401
from ..runtime import anomaly as anomaly_mode, grad_mode  # noqa: F401
from ..runtime.autograd_function import Function, FunctionCtx, once_differentiable  # noqa: F401
from ..runtime.gradcheck import GradcheckError, gradcheck, gradgradcheck  # noqa: F401
from ..runtime.grad_mode import (enable_grad, inference_mode, no_grad,  # noqa: F401
                                 set_grad_enabled, set_multithreading_enabled)
from ..runtime.anomaly import (detect_anomaly, is_anomaly_check_nan_enabled,  # noqa: F401
                               is_anomaly_enabled, set_detect_anomaly)
from ..runtime.tensor import Tensor
from . import forward_ad, functional, graph, profiler  # noqa: F401,E402


class _VariableMeta(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor)


class Variable(metaclass=_VariableMeta):
    """The deprecated torch.autograd.Variable: Variable(t) is a new leaf over t's data (t
    detached), requiring grad as asked; every tensor is an instance of it, as in PyTorch.
    `volatile` has no effect, as in PyTorch since 0.4 (which warns, and refuses it with
    requires_grad)."""

    def __new__(cls, data, requires_grad=False, volatile=False):
        if volatile:
            warnings.warn("volatile was removed and now has no effect. Use `with "
                          "torch.no_grad():` instead.", UserWarning, stacklevel=2)
            if requires_grad:
                raise ValueError("Variable can't be volatile and require_grad at the same "
                                 "time!")
        if not isinstance(data, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        return data.detach().requires_grad_(bool(requires_grad))


def variable(*args, **kwargs):
    """The removed torch.autograd.variable: raises PyTorch's RuntimeError."""
    raise RuntimeError("torch.autograd.variable(...) is deprecated, use torch.tensor(...) "
                       "instead")
