"""llgrad.signal: torch.signal's namespace (its one member, windows)."""
from . import windows  # noqa: F401

__all__ = ["windows"]
