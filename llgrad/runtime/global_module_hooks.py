"""torch.nn.modules.module's global hooks (register_module_forward_hook and its kin): the
hooks every module call runs before its own, kept here, below nn and compile. nn registers
and runs them (nn/module_hooks.py); a compiled function runs eagerly while any is registered
(a trace would run them once, at trace time, not at each call: a module call's hooks, or a
registration hook of a module made inside). `clear()` removes them all."""
from collections import OrderedDict

forward_pre = OrderedDict()
forward = OrderedDict()
forward_with_kwargs = OrderedDict()     # ids of forward hooks taking (module, args, kwargs, out)
forward_always_called = OrderedDict()   # ids of forward hooks run when forward raises too
backward_pre = OrderedDict()
backward = OrderedDict()
backward_kind = {"full": None}          # True: full backward hooks; False: the deprecated kind
buffer_registration = OrderedDict()
module_registration = OrderedDict()
parameter_registration = OrderedDict()
_ALL = (forward_pre, forward, forward_with_kwargs, forward_always_called, backward_pre,
        backward, buffer_registration, module_registration, parameter_registration)


def call_hooks():
    """Whether a hook that runs around module calls is registered."""
    return bool(forward_pre or forward or backward_pre or backward)


def any_hooks():
    """Whether any global module hook is registered."""
    return any(_ALL)


def clear():
    """Remove every global module hook."""
    for d in _ALL:
        d.clear()
    backward_kind["full"] = None


def registered(hooks, module, name, value):
    """value after the registration hooks in `hooks` (hook(module, name, value) -> None or a
    replacement), as PyTorch runs them when a buffer, module or parameter is registered."""
    for hook in tuple(hooks.values()):
        out = hook(module, name, value)
        if out is not None:
            value = out
    return value
