"""torch.nn.modules.instancenorm's classes, where PyTorch programs import them from."""
from ..layers_3d import (  # noqa: F401
    InstanceNorm3d, LazyInstanceNorm1d, LazyInstanceNorm2d, LazyInstanceNorm3d)
from ..layers_norm_more import InstanceNorm1d, InstanceNorm2d, _InstanceNorm  # noqa: F401
