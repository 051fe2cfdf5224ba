"""llgrad.nn: functional layers (modules and losses come with the modules issue)."""
from . import functional  # noqa: F401
