"""torch.ao.nn (the quantized modules)."""
from . import quantized  # noqa: F401
