"""llgrad.nn.attention: torch.nn.attention's SDPBackend and sdpa_kernel. llgrad has one
implementation of scaled_dot_product_attention (the math one, compiled into fused loops under
llgrad.compile); choosing backends sets torch.backends.cuda's flags as PyTorch does, which
decide whether a result wears PyTorch's CPU flash kernel's node and layout (or that no
backend is left, an error). Its submodules `bias` and `flex_attention`
(torch.nn.attention's) are attention_bias.py and attention_flex.py, registered under those
names."""
import contextlib
from enum import IntEnum
import sys

from ..backends import cuda as _cuda
from . import attention_bias as bias, attention_flex as flex_attention

# (`import llgrad.nn.attention.bias` / `.flex_attention` find them)
sys.modules[__name__ + ".bias"] = bias
sys.modules[__name__ + ".flex_attention"] = flex_attention

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


_FLAGS = {"flash": SDPBackend.FLASH_ATTENTION, "mem_efficient": SDPBackend.EFFICIENT_ATTENTION,
          "math": SDPBackend.MATH, "cudnn": SDPBackend.CUDNN_ATTENTION}


@contextlib.contextmanager
def sdpa_kernel(backends, set_priority=False):
    """Context manager choosing scaled_dot_product_attention's backends (a SDPBackend or a
    list of them), as torch.nn.attention.sdpa_kernel."""
    chosen = [backends] if isinstance(backends, SDPBackend) else list(backends)
    if not all(isinstance(b, SDPBackend) for b in chosen):
        raise AssertionError("Backend must be an instance of SDPBackend or a list of "
                             "SDPBackend instances")
    # (the flags PyTorch's CPU dispatch reads: flash or math)
    saved = dict(_cuda._sdp)
    for key, backend in _FLAGS.items():
        _cuda._sdp[key] = backend in chosen
    try:
        yield {}
    finally:
        _cuda._sdp.update(saved)
