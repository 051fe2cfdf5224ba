"""llgrad.autograd: PyTorch's autograd namespace (re-exports)."""
from .runtime.autograd_api import backward, grad  # noqa: F401
from .runtime import autograd_function as function  # noqa: F401  (autograd.function.*)
from .runtime.autograd_function import Function, FunctionCtx, once_differentiable  # noqa: F401
from .runtime.gradcheck import GradcheckError, gradcheck, gradgradcheck  # noqa: F401
from .runtime.grad_mode import (enable_grad, inference_mode, no_grad,  # noqa: F401
                                set_grad_enabled)
from .runtime.anomaly import (detect_anomaly, is_anomaly_check_nan_enabled,  # noqa: F401
                              is_anomaly_enabled, set_detect_anomaly)
from . import autograd_functional as functional  # noqa: F401,E402  (autograd.functional.*)
