"""torch.nn.modules.distance's classes, where PyTorch programs import them from."""
from ..layers_loss_more import CosineSimilarity, PairwiseDistance  # noqa: F401
