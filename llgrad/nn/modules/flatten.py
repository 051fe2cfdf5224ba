"""torch.nn.modules.flatten's classes, where PyTorch programs import them from."""
from ..layers import Flatten, Unflatten  # noqa: F401
