"""torch.nn.modules.conv's classes, where PyTorch programs import them from."""
from ..layers_3d import Conv3d, ConvTranspose3d, LazyConv3d, LazyConvTranspose3d  # noqa: F401
from ..layers_conv import Conv2d  # noqa: F401
from ..layers_conv_base import _ConvNd  # noqa: F401
from ..layers_conv_more import (  # noqa: F401
    Conv1d, ConvTranspose1d, ConvTranspose2d, _ConvTransposeNd)
from ..layers_lazy import (  # noqa: F401
    LazyConv1d, LazyConv2d, LazyConvTranspose1d, LazyConvTranspose2d)
