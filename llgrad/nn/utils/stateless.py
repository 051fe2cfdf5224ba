"""llgrad.nn.utils.stateless: the deprecated torch.nn.utils.stateless.functional_call (now
torch.func.functional_call)."""
import warnings

from ...func.functional_call import functional_call as _functional_call

__all__ = ["functional_call"]


def functional_call(module, parameters_and_buffers, args=None, kwargs=None, *,
                    tie_weights=True, strict=False):
    """module called with parameters_and_buffers in place of its own, as
    torch.func.functional_call (this spelling is deprecated in PyTorch, with a warning)."""
    warnings.warn("`torch.nn.utils.stateless.functional_call` is deprecated as of PyTorch 2.0 "
                  "and will be removed in a future version of PyTorch. Please use "
                  "`torch.func.functional_call` instead which is a drop-in replacement.",
                  FutureWarning, stacklevel=2)
    return _functional_call(module, parameters_and_buffers, args, kwargs,
                            tie_weights=tie_weights, strict=strict)
