"""torch.nn.modules.fold's classes, where PyTorch programs import them from."""
from ..layers_extra import Fold, Unfold  # noqa: F401
