"""torch.nn.modules.module's classes and global hooks, where PyTorch programs import them
from."""
from ..module import Module  # noqa: F401
from ..module_access import _IncompatibleKeys  # noqa: F401
from ..module_global_hooks import (  # noqa: F401
    register_module_backward_hook, register_module_buffer_registration_hook,
    register_module_forward_hook, register_module_forward_pre_hook,
    register_module_full_backward_hook, register_module_full_backward_pre_hook,
    register_module_module_registration_hook, register_module_parameter_registration_hook)
from ..module_hooks import BackwardHook  # noqa: F401
from ..parameter import Parameter  # noqa: F401
from ...utils.hooks import RemovableHandle  # noqa: F401
