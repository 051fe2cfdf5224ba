"""torch.ao: the quantized modules (ao.nn) and post-training dynamic quantization
(ao.quantization)."""
from . import nn, quantization  # noqa: F401
