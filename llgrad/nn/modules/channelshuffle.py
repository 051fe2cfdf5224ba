"""torch.nn.modules.channelshuffle's classes, where PyTorch programs import them from."""
from ..layers_shuffle import ChannelShuffle  # noqa: F401
