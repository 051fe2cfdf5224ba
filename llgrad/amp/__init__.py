"""llgrad.amp: torch.amp's autocast and GradScaler (see autocast_mode.py and grad_scaler.py
for what runs on llgrad's CPU-only backend)."""
from .autocast_mode import (autocast, custom_bwd, custom_fwd, get_autocast_dtype,  # noqa: F401
                            is_autocast_available, is_autocast_enabled)
from .grad_scaler import GradScaler  # noqa: F401

__all__ = ["autocast", "GradScaler", "custom_fwd", "custom_bwd", "is_autocast_available"]
