"""llgrad.autograd.function: torch.autograd.function's Function, FunctionCtx and
once_differentiable."""
from ..runtime.autograd_function import *  # noqa: F401,F403
from ..runtime.autograd_function import Function, FunctionCtx, once_differentiable  # noqa: F401
