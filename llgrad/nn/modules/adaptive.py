"""torch.nn.modules.adaptive's class, where PyTorch programs import it from."""
from ..layers_adaptive import AdaptiveLogSoftmaxWithLoss  # noqa: F401
