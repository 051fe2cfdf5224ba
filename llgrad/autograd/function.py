"""llgrad.autograd.function: torch.autograd.function's Function, FunctionCtx,
once_differentiable and the legacy InplaceFunction."""
from ..runtime.autograd_function import *  # noqa: F401,F403
from ..runtime.autograd_function import Function, FunctionCtx, once_differentiable  # noqa: F401


class InplaceFunction(Function):
    """As torch.autograd.function.InplaceFunction (kept for old code): a Function whose
    instances carry an `inplace` flag."""

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace
