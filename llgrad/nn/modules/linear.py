"""torch.nn.modules.linear's classes, where PyTorch programs import them from."""
from ..layers import Identity, Linear  # noqa: F401
from ..layers_attention import NonDynamicallyQuantizableLinear  # noqa: F401
from ..layers_lazy import LazyLinear  # noqa: F401
from ..layers_shuffle import Bilinear  # noqa: F401
