"""torch.nn.modules.module's classes, where PyTorch programs import them from."""
from ..module import Module  # noqa: F401
from ..module_access import _IncompatibleKeys  # noqa: F401
