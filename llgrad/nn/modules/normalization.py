"""torch.nn.modules.normalization's classes, where PyTorch programs import them from."""
from ..layers_norm import LayerNorm  # noqa: F401
from ..layers_norm_more import GroupNorm, LocalResponseNorm, RMSNorm  # noqa: F401
