"""The optimiser's hooks, as torch.optim.Optimizer's: step pre / post hooks (the
optimiser's own and the global ones of register_optimizer_step_pre_hook / post_hook), and
state_dict / load_state_dict pre / post hooks. Every subclass's step runs its hooks
(Optimizer.__init_subclass__ wraps it with hooked_step); with none registered it calls the
step at once."""
from collections import OrderedDict
from functools import wraps
from itertools import chain

from ..runtime import global_optimizer_hooks, trace_state
from ..runtime.tensor import Tensor
from ..utils.hooks import RemovableHandle
from ._flags import check_sparse_grads, check_step_flags, refuses_sparse

_global_pre_hooks = global_optimizer_hooks.step_pre     # (compile/eager_only.py reads them)
_global_post_hooks = global_optimizer_hooks.step_post


def register_optimizer_step_pre_hook(hook):
    """hook(optimizer, args, kwargs) before every optimiser's step (None, or a new
    (args, kwargs)), as torch.optim.optimizer.register_optimizer_step_pre_hook."""
    handle = RemovableHandle(_global_pre_hooks)
    _global_pre_hooks[handle.id] = hook
    return handle


def register_optimizer_step_post_hook(hook):
    """hook(optimizer, args, kwargs) after every optimiser's step, as
    torch.optim.optimizer.register_optimizer_step_post_hook."""
    handle = RemovableHandle(_global_post_hooks)
    _global_post_hooks[handle.id] = hook
    return handle


def hooked_step(func):
    """func (a step method) running the step hooks around it, as PyTorch's wrapper: args
    includes the optimiser; a pre hook may return (new_args, new_kwargs)."""
    @wraps(func)
    def step(self, *args, **kwargs):
        pre = self.__dict__.get("_optimizer_step_pre_hooks")
        post = self.__dict__.get("_optimizer_step_post_hooks")
        _untraced_below_float32(self)
        args, kwargs = _closure_checked(self, args, kwargs)
        if not (pre or post or _global_pre_hooks or _global_post_hooks):
            return _refusals_checked(self, func, (self,) + args, kwargs)
        args = (self,) + args
        for hook in chain(_global_pre_hooks.values(), (pre or {}).values()):
            result = hook(self, args, kwargs)
            if result is not None:
                if not (isinstance(result, tuple) and len(result) == 2):
                    raise RuntimeError(f"{func} must return None or a tuple of (new_args, "
                                       f"new_kwargs), but got {result}.")
                args, kwargs = result
        out = _refusals_checked(self, func, args, kwargs)
        for hook in chain((post or {}).values(), _global_post_hooks.values()):
            hook(self, args, kwargs)
        return out

    step._hooked = True
    return step


def _refusals_checked(opt, func, args, kwargs):
    """func(*args, **kwargs) (args begin with opt) after PyTorch's step-time refusals (a
    sparse gradient, a complex parameter of a fused step, capturable or differentiable on
    CPU), group by group as PyTorch's step meets them: the groups before a refused one take
    their step first (a step with a closure is refused before any)."""
    for k, group in enumerate(opt.param_groups):
        try:
            check_step_flags(opt, (group,))
            check_sparse_grads(opt, (group,))
        except Exception:
            if k and kwargs.get("closure", args[1] if len(args) > 1 else None) is None:
                groups = opt.param_groups
                opt.param_groups = groups[:k]
                try:
                    func(*args, **kwargs)
                finally:
                    opt.param_groups = groups
            raise
    return func(*args, **kwargs)


def _closure_checked(opt, args, kwargs):
    """(args, kwargs) with a closure that checks, after it ran, for sparse gradients the
    optimiser refuses (PyTorch's step checks them after its closure)."""
    closure = kwargs.get("closure", args[0] if args else None)
    if closure is None or not callable(closure) or refuses_sparse(opt) is None:
        return args, kwargs

    def checked():
        out = closure()
        check_sparse_grads(opt)
        return out
    if "closure" in kwargs:
        return args, dict(kwargs, closure=checked)
    return (checked,) + args[1:], kwargs


def _untraced_below_float32(opt):
    """While a compiled function is traced, a step that updates float16 parameters runs
    eagerly (a graph break): PyTorch computes such an update with its Python numbers (lr,
    momentum, a bias correction) in float32, which the graph holds as float64 inputs cast
    to float16 beside the parameter, rounding otherwise."""
    tracer = trace_state.state.tracer
    if tracer is None:
        return
    for group in opt.param_groups:
        for p in dict.get(group, "params", ()):
            if isinstance(p, Tensor) and p.dtype.is_floating_point and \
                    p.dtype.name not in ("float32", "float64") and p.grad is not None:
                tracer.graph_break(f"an optimiser step on {p.dtype.name} parameters (PyTorch "
                                   "computes their update with its numbers in float32)")


def _register(opt, name, hook, prepend=False):
    hooks = opt.__dict__.get(name)
    if hooks is None:
        hooks = opt.__dict__[name] = OrderedDict()
    handle = RemovableHandle(hooks)
    hooks[handle.id] = hook
    if prepend:
        hooks.move_to_end(handle.id, last=False)
    return handle


def run_hooks(opt, name, *args):
    """Run opt's hooks of kind name on args; a hook's non-None result replaces the last
    argument (the state dict) for the hooks after it and is returned."""
    last = args[-1] if args else None
    for hook in list(opt.__dict__.get(name, {}).values()):
        result = hook(opt, *args)
        if result is not None and args:
            last = result
            args = args[:-1] + (result,)
    return last


class OptimizerHooks:
    """The hook registration methods of Optimizer."""

    def register_step_pre_hook(self, hook):
        """hook(optimizer, args, kwargs) before this optimiser's step; as
        torch.optim.Optimizer.register_step_pre_hook."""
        return _register(self, "_optimizer_step_pre_hooks", hook)

    def register_step_post_hook(self, hook):
        """hook(optimizer, args, kwargs) after this optimiser's step; as
        torch.optim.Optimizer.register_step_post_hook."""
        return _register(self, "_optimizer_step_post_hooks", hook)

    def register_state_dict_pre_hook(self, hook, prepend=False):
        """hook(optimizer) before state_dict(), as PyTorch's."""
        return _register(self, "_optimizer_state_dict_pre_hooks", hook, prepend)

    def register_state_dict_post_hook(self, hook, prepend=False):
        """hook(optimizer, state_dict) after state_dict(): a result replaces it, as PyTorch's."""
        return _register(self, "_optimizer_state_dict_post_hooks", hook, prepend)

    def register_load_state_dict_pre_hook(self, hook, prepend=False):
        """hook(optimizer, state_dict) before load_state_dict(): a result replaces the dict
        loaded, as PyTorch's."""
        return _register(self, "_optimizer_load_state_dict_pre_hooks", hook, prepend)

    def register_load_state_dict_post_hook(self, hook, prepend=False):
        """hook(optimizer) after load_state_dict(), as PyTorch's."""
        return _register(self, "_optimizer_load_state_dict_post_hooks", hook, prepend)
