"""llgrad.autograd: PyTorch's autograd namespace (re-exports)."""
from .runtime.autograd_api import backward, grad  # noqa: F401
from .runtime import autograd_function as function  # noqa: F401  (autograd.function.*)
from .runtime.autograd_function import Function, FunctionCtx, once_differentiable  # noqa: F401
from .runtime.gradcheck import GradcheckError, gradcheck, gradgradcheck  # noqa: F401
from .runtime.grad_mode import (enable_grad, inference_mode, no_grad,  # noqa: F401
                                set_grad_enabled)
