"""torch.nn.modules.lazy's classes, where PyTorch programs import them from."""
from ..layers_lazy import LazyModuleMixin  # noqa: F401
