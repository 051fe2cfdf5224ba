"""torch.nn.modules.padding's classes, where PyTorch programs import them from."""
from ..layers_pad import (  # noqa: F401
    CircularPad1d, CircularPad2d, CircularPad3d, ConstantPad1d, ConstantPad2d, ConstantPad3d,
    ReflectionPad1d, ReflectionPad2d, ReflectionPad3d, ReplicationPad1d, ReplicationPad2d,
    ReplicationPad3d, ZeroPad1d, ZeroPad2d, ZeroPad3d, _ConstantPadNd)
