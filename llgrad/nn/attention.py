"""llgrad.nn.attention: torch.nn.attention's SDPBackend and sdpa_kernel. llgrad has one
implementation of scaled_dot_product_attention (the math one, compiled into fused loops under
llgrad.compile), so choosing backends changes nothing but is checked as PyTorch checks it."""
import contextlib
from enum import IntEnum

__all__ = ["SDPBackend", "sdpa_kernel", "WARN_FOR_UNFUSED_KERNELS"]

WARN_FOR_UNFUSED_KERNELS = False


class SDPBackend(IntEnum):
    """The backends of scaled_dot_product_attention, as torch.nn.attention.SDPBackend."""
    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3
    OVERRIDEABLE = 4


@contextlib.contextmanager
def sdpa_kernel(backends, set_priority=False):
    """Context manager choosing scaled_dot_product_attention's backends (a SDPBackend or a
    list of them), as torch.nn.attention.sdpa_kernel."""
    chosen = [backends] if isinstance(backends, SDPBackend) else list(backends)
    if not all(isinstance(b, SDPBackend) for b in chosen):
        raise AssertionError("Backend must be an instance of SDPBackend or a list of "
                             "SDPBackend instances")
    yield
