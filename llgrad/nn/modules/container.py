"""torch.nn.modules.container's classes, where PyTorch programs import them from."""
from ..layers_container import Container, ModuleDict, ModuleList, Sequential  # noqa: F401
from ..layers_param_container import ParameterDict, ParameterList  # noqa: F401
