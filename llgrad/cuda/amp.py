"""llgrad.cuda.amp: the deprecated torch.cuda.amp.autocast and GradScaler, with PyTorch's
deprecation warnings; as there is no CUDA device they disable themselves (llgrad.amp)."""
import functools
import warnings

from ..amp import autocast as _autocast, custom_bwd as _custom_bwd, custom_fwd as _custom_fwd
from ..amp.grad_scaler import GradScaler as _GradScaler
from ..runtime.dtypes import float16
from .cpu_build import amp_definitely_not_available  # noqa: F401

__all__ = ["autocast", "GradScaler", "custom_fwd", "custom_bwd",
           "amp_definitely_not_available"]


class autocast(_autocast):
    def __init__(self, enabled=True, dtype=float16, cache_enabled=True):
        warnings.warn("`torch.cuda.amp.autocast(args...)` is deprecated. Please use "
                      "`torch.amp.autocast('cuda', args...)` instead.", FutureWarning,
                      stacklevel=2)
        super().__init__("cuda", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


class GradScaler(_GradScaler):
    def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        warnings.warn("`torch.cuda.amp.GradScaler(args...)` is deprecated. Please use "
                      "`torch.amp.GradScaler('cuda', args...)` instead.", FutureWarning,
                      stacklevel=2)
        super().__init__("cuda", init_scale, growth_factor, backoff_factor, growth_interval,
                         enabled)


def custom_fwd(fwd=None, *, cast_inputs=None):
    """The deprecated torch.cuda.amp.custom_fwd: torch.amp.custom_fwd for device 'cuda',
    with PyTorch's warning."""
    warnings.warn("`torch.cuda.amp.custom_fwd(args...)` is deprecated. Please use "
                  "`torch.amp.custom_fwd(args..., device_type='cuda')` instead.", FutureWarning,
                  stacklevel=2)
    return functools.partial(_custom_fwd, device_type="cuda")(fwd=fwd, cast_inputs=cast_inputs)


def custom_bwd(bwd):
    """The deprecated torch.cuda.amp.custom_bwd: torch.amp.custom_bwd for device 'cuda',
    with PyTorch's warning."""
    warnings.warn("`torch.cuda.amp.custom_bwd(args...)` is deprecated. Please use "
                  "`torch.amp.custom_bwd(args..., device_type='cuda')` instead.", FutureWarning,
                  stacklevel=2)
    return functools.partial(_custom_bwd, device_type="cuda")(bwd)

