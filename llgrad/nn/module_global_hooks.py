"""torch.nn.modules.module.register_module_*_hook: hooks every module runs (its own after
them), kept in runtime/global_module_hooks.py. A registration makes every module's call take
the hook path (ModuleHooks._has_hooks); a compiled function runs eagerly while one is
registered (compile/eager_only.py), so each call runs them as eager does."""
from ..runtime import global_module_hooks as _global
from ..utils.hooks import RemovableHandle
from .module_hooks import ModuleHooks

__all__ = ["register_module_forward_pre_hook", "register_module_forward_hook",
           "register_module_backward_hook", "register_module_full_backward_pre_hook",
           "register_module_full_backward_hook", "register_module_buffer_registration_hook",
           "register_module_module_registration_hook",
           "register_module_parameter_registration_hook"]


def _added(hooks, hook, extra=(), around_calls=True):
    handle = RemovableHandle(hooks, extra_dict=list(extra) or None)
    hooks[handle.id] = hook
    if around_calls:
        ModuleHooks._has_hooks = True   # (every module call runs the hooks from now on)
    return handle


def register_module_forward_pre_hook(hook):
    """hook(module, args) -> None or new args, before every module's forward (and its own
    pre-hooks), as torch.nn.modules.module.register_module_forward_pre_hook."""
    return _added(_global.forward_pre, hook)


def register_module_forward_hook(hook, *, with_kwargs=False, always_call=False):
    """hook(module, args, output) -> None or a new output (with_kwargs: hook(module, args,
    kwargs, output)), after every module's forward, as
    torch.nn.modules.module.register_module_forward_hook."""
    handle = _added(_global.forward, hook, (_global.forward_with_kwargs,
                                            _global.forward_always_called))
    if with_kwargs:
        _global.forward_with_kwargs[handle.id] = True
    if always_call:
        _global.forward_always_called[handle.id] = True
    return handle


def _backward_kind(full):
    if _global.backward_kind["full"] is not None and _global.backward_kind["full"] is not full \
            and _global.backward:
        raise RuntimeError("Cannot use both regular backward hooks and full backward hooks as "
                           "a global Module hook. Please use only one of them.")
    _global.backward_kind["full"] = full


def register_module_backward_hook(hook):
    """The deprecated non-full global backward hook, as
    torch.nn.modules.module.register_module_backward_hook."""
    _backward_kind(False)
    return _added(_global.backward, hook)


def register_module_full_backward_pre_hook(hook):
    """hook(module, grad_output) -> None or new grad_output for every module, as
    torch.nn.modules.module.register_module_full_backward_pre_hook."""
    return _added(_global.backward_pre, hook)


def register_module_full_backward_hook(hook):
    """hook(module, grad_input, grad_output) -> None or new grad_input for every module, as
    torch.nn.modules.module.register_module_full_backward_hook."""
    _backward_kind(True)
    return _added(_global.backward, hook)


def register_module_buffer_registration_hook(hook):
    """hook(module, name, buffer) -> None or a new buffer, when any module registers a
    buffer, as torch.nn.modules.module.register_module_buffer_registration_hook."""
    return _added(_global.buffer_registration, hook, around_calls=False)


def register_module_module_registration_hook(hook):
    """hook(module, name, submodule) -> None or a new submodule, when any module registers a
    submodule, as torch.nn.modules.module.register_module_module_registration_hook."""
    return _added(_global.module_registration, hook, around_calls=False)


def register_module_parameter_registration_hook(hook):
    """hook(module, name, param) -> None or a new parameter, when any module registers a
    parameter, as torch.nn.modules.module.register_module_parameter_registration_hook."""
    return _added(_global.parameter_registration, hook, around_calls=False)
