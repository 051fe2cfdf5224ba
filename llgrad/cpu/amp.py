"""llgrad.cpu.amp: the deprecated torch.cpu.amp.autocast and GradScaler, with PyTorch's
deprecation warnings (llgrad.amp: CPU autocast in bfloat16 or float16; the GradScaler
scales gradients as PyTorch's does)."""
import warnings

from ..amp import autocast as _autocast
from ..amp.grad_scaler import GradScaler as _GradScaler
from ..runtime.dtypes import bfloat16

__all__ = ["autocast", "GradScaler"]


class autocast(_autocast):
    """torch.cpu.amp.autocast (deprecated): llgrad.autocast('cpu', ...)."""

    def __init__(self, enabled=True, dtype=bfloat16, cache_enabled=True):
        warnings.warn("`torch.cpu.amp.autocast(args...)` is deprecated. Please use "
                      "`torch.amp.autocast('cpu', args...)` instead.", FutureWarning,
                      stacklevel=2)
        super().__init__("cpu", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


class GradScaler(_GradScaler):
    """torch.cpu.amp.GradScaler (deprecated): llgrad.amp.GradScaler('cpu', ...)."""

    def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        warnings.warn("`torch.cpu.amp.GradScaler(args...)` is deprecated. Please use "
                      "`torch.amp.GradScaler('cpu', args...)` instead.", FutureWarning,
                      stacklevel=2)
        super().__init__("cpu", init_scale, growth_factor, backoff_factor, growth_interval,
                         enabled)
