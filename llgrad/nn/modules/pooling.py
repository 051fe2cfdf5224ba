"""torch.nn.modules.pooling's classes, where PyTorch programs import them from."""
from ..layers_3d import (  # noqa: F401
    AdaptiveAvgPool3d, AdaptiveMaxPool3d, AvgPool3d, LPPool3d, MaxPool3d, MaxUnpool3d)
from ..layers_conv import MaxPool2d  # noqa: F401
from ..layers_extra import MaxPool1d  # noqa: F401
from ..layers_pool import (  # noqa: F401
    AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveMaxPool1d, AdaptiveMaxPool2d, AvgPool1d,
    AvgPool2d, _AdaptiveAvgPoolNd, _AdaptiveMaxPoolNd, _AvgPoolNd)
from ..layers_pool_more import (  # noqa: F401
    FractionalMaxPool2d, FractionalMaxPool3d, LPPool1d, LPPool2d, MaxUnpool1d, MaxUnpool2d,
    _LPPoolNd, _MaxUnpoolNd)
