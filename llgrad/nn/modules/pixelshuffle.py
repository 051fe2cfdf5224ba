"""torch.nn.modules.pixelshuffle's classes, where PyTorch programs import them from."""
from ..layers_shuffle import PixelShuffle, PixelUnshuffle  # noqa: F401
