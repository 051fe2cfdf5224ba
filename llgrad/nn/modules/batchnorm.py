"""torch.nn.modules.batchnorm's classes, where PyTorch programs import them from."""
from ..layers_3d import BatchNorm3d, LazyBatchNorm3d  # noqa: F401
from ..layers_lazy import LazyBatchNorm1d, LazyBatchNorm2d  # noqa: F401
from ..layers_norm import BatchNorm1d, BatchNorm2d, _BatchNorm  # noqa: F401
