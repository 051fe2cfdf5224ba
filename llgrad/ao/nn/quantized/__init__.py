"""torch.ao.nn.quantized (its dynamic modules)."""
from . import dynamic  # noqa: F401
