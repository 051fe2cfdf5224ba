"""torch.nn.modules.dropout's classes, where PyTorch programs import them from."""
from ..layers import Dropout  # noqa: F401
from ..layers_extra import (  # noqa: F401
    AlphaDropout, Dropout1d, Dropout2d, Dropout3d, FeatureAlphaDropout, _DropoutNd)
