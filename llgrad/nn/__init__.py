"""llgrad.nn: Module, Parameter, layers, losses (PyTorch's API), functional and init."""
from . import functional, init, utils  # noqa: F401
from .module import Module, Parameter  # noqa: F401
from .layers import *  # noqa: F401,F403
