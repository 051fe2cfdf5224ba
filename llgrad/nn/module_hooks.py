"""Module hooks, run as PyTorch runs them: forward pre-hooks and forward hooks around
forward, and full backward (pre-)hooks (PyTorch's torch.utils.hooks.BackwardHook): the
module's tensor inputs and outputs pass through an identity autograd Function, and hooks on
its two nodes see the gradients with respect to the outputs (grad_output) and then those
with respect to the inputs (grad_input), and may replace them.

A module without hooks keeps none: the hook dicts are class-level empty mappings until a
hook is registered (then an OrderedDict on the instance, as in PyTorch), so the compiled
guard walk over a model does not grow with them. Inside a compiled function, registering
the backward hooks on the identity's nodes is a graph break: the call runs eagerly, with a
warning, and the hooks run as in eager mode."""
import types
import warnings
from collections import OrderedDict

from ..compile.compiled_function import compile as _compile
from ..runtime import global_module_hooks as _global, grad_mode, trace_state
from ..runtime.creation import zeros
from ..runtime.saved_tensor import user_location
from ..runtime.autograd_function import Function
from ..runtime.tensor import Tensor
from ..utils.hooks import RemovableHandle

_NO_HOOKS = types.MappingProxyType({})


class BackwardHookFunction(Function):
    @staticmethod
    def forward(ctx, *args):
        ctx.mark_non_differentiable(*[a for a in args if not a.requires_grad])
        return args

    @staticmethod
    def backward(ctx, *args):
        return args


def _note_backward_hooks(module):
    """What a compiled call's fallback names when these hooks end up on the graph of a
    result (the tracer's inner_hooks): the user registered them on the module, perhaps
    between calls, not inside the function, which only calls the module."""
    tracer = trace_state.state.tracer
    if tracer is not None and not tracer.inner_hooks:
        tracer.inner_hooks = f"the full backward hooks of a {type(module).__name__} module " \
            f"the function calls (at {user_location()}), which its forward registers"


class BackwardHook:
    def __init__(self, module, user_hooks, user_pre_hooks):
        self.user_hooks = user_hooks
        self.user_pre_hooks = user_pre_hooks
        self.module = module
        self.grad_outputs = None
        self.n_outputs = -1
        self.output_tensors_index = None
        self.n_inputs = -1
        self.input_tensors_index = None

    @staticmethod
    def _pack_with_none(indices, values, size):
        res = [None] * size
        for idx, val in zip(indices, values):
            res[idx] = val
        return tuple(res)

    @staticmethod
    def _unpack_none(indices, values):
        return tuple(values[idx] for idx in indices)

    def _set_user_hook(self, grad_fn):
        def hook(grad_input, _):
            if self.grad_outputs is None:
                # the gradient reached the inputs without passing through the outputs
                return None
            # PyTorch's hook sees the identity's gradients for every tensor input (zeros
            # materialised for one that does not require grad); llgrad's engine hands None
            # to node hooks for inputs without an edge: materialise them here
            grad_input = tuple(g if g is not None else zeros(shape, dtype=dtype)
                               for g, (shape, dtype) in zip(grad_input, self._input_meta))
            res = self._pack_with_none(self.input_tensors_index, grad_input, self.n_inputs)
            for user_hook in self.user_hooks:
                out = user_hook(self.module, res, self.grad_outputs)
                if out is None:
                    continue
                if len(out) != len(res):
                    raise RuntimeError("Backward hook returned an invalid number of grad_input, "
                                       f"got {len(out)}, but expected {len(res)}")
                res = out
            self.grad_outputs = None
            return self._unpack_none(self.input_tensors_index, res)
        grad_fn.register_hook(hook)

    def _apply_on_tensors(self, fn, args):
        tensors_idx, tensors = [], []
        requires_grad = False
        for i, arg in enumerate(args):
            if isinstance(arg, Tensor):
                tensors_idx.append(i)
                tensors.append(arg)
                requires_grad |= arg.requires_grad
        if not (requires_grad and grad_mode.is_grad_enabled()):
            return args, None
        new_tensors = BackwardHookFunction.apply(*tensors)
        if len(new_tensors) == 0:
            raise RuntimeError("Cannot set Module backward hook for a Module with no input "
                               "Tensors.")
        grad_fns = [t.grad_fn for t in new_tensors if t.grad_fn is not None
                    and t.grad_fn.name() == "BackwardHookFunctionBackward"]
        if len(grad_fns) == 0:
            raise RuntimeError("Error while setting up backward hooks.")
        fn(grad_fns[0])
        arg_list = list(args)
        for idx, val in zip(tensors_idx, new_tensors):
            arg_list[idx] = val
        out = tuple(arg_list) if type(args) is tuple else type(args)(*arg_list)
        return out, tensors_idx

    def setup_input_hook(self, args):
        self._input_meta = [(tuple(a.shape), a.dtype) for a in args if isinstance(a, Tensor)]
        res, input_idx = self._apply_on_tensors(self._set_user_hook, args)
        self.n_inputs = len(args)
        self.input_tensors_index = input_idx
        return res

    def setup_output_hook(self, args):
        def fn(grad_fn):
            def hook(_, grad_output):
                self.grad_outputs = self._pack_with_none(self.output_tensors_index, grad_output,
                                                         self.n_outputs)
                if self.user_pre_hooks:
                    expected_len = len(self.grad_outputs)
                    for user_pre_hook in self.user_pre_hooks:
                        hook_grad_outputs = user_pre_hook(self.module, self.grad_outputs)
                        if hook_grad_outputs is None:
                            continue
                        if len(hook_grad_outputs) != expected_len:
                            raise RuntimeError("Backward pre hook returned an invalid number of "
                                               f"grad_output, got {len(hook_grad_outputs)}, "
                                               f"but expected {expected_len}")
                        self.grad_outputs = hook_grad_outputs
                local_grad_outputs = self.grad_outputs
                if self.input_tensors_index is None:
                    warnings.warn("Full backward hook is firing when gradients are computed with "
                                  "respect to module outputs since no inputs require gradients. "
                                  "See https://docs.pytorch.org/docs/main/generated/torch.nn."
                                  "Module.html#torch.nn.Module.register_full_backward_hook for "
                                  "more details.", stacklevel=5)
                    grad_inputs = self._pack_with_none([], [], self.n_inputs)
                    for user_hook in self.user_hooks:
                        res = user_hook(self.module, grad_inputs, self.grad_outputs)
                        if res is not None and not (isinstance(res, tuple)
                                                    and all(el is None for el in res)):
                            raise RuntimeError("Backward hook for Modules where no input "
                                               "requires gradient should always return None "
                                               "or None for all gradients.")
                    self.grad_outputs = None
                if local_grad_outputs is not None:
                    return tuple(local_grad_outputs[i] for i in self.output_tensors_index)
                return None
            grad_fn.register_hook(hook)

        is_tuple = isinstance(args, tuple)
        if not is_tuple:
            args = (args,)
        res, output_idx = self._apply_on_tensors(fn, args)
        self.n_outputs = len(args)
        self.output_tensors_index = output_idx
        return res if is_tuple else res[0]


class CompiledForward:
    """A module's forward after module.compile(): llgrad.compile of its class's forward. A
    copy or a pickle of the module compiles its own forward again (a compiled function's
    traces and kernels belong to the module they were made for)."""

    def __init__(self, module, args, kwargs):
        self.module, self.args, self.kwargs = module, args, kwargs
        self.fn = _compile(type(module).forward.__get__(module), *args, **kwargs)

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)

    def __reduce__(self):
        return CompiledForward, (self.module, self.args, self.kwargs)


class ModuleHooks:
    """The hook half of Module: registration, and the call that runs the hooks (Module's
    __call__ takes it only once a hook is registered)."""
    _has_hooks = False               # set on an instance when it registers its first hook
    _forward_pre_hooks = _NO_HOOKS
    _forward_pre_hooks_with_kwargs = _NO_HOOKS
    _forward_hooks = _NO_HOOKS
    _forward_hooks_with_kwargs = _NO_HOOKS
    _forward_hooks_always_called = _NO_HOOKS
    _backward_pre_hooks = _NO_HOOKS
    _backward_hooks = _NO_HOOKS
    _non_full_backward_hooks = _NO_HOOKS

    def compile(self, *args, **kwargs):
        """Compile the module's forward in place, as torch.nn.Module.compile: later calls
        of the module run llgrad.compile(forward, *args, **kwargs) (its hooks around it)."""
        object.__setattr__(self, "forward", CompiledForward(self, args, kwargs))

    def _hook_dict(self, name):
        d = self.__dict__.get(name)
        if d is None:
            d = OrderedDict()
            object.__setattr__(self, name, d)
        object.__setattr__(self, "_has_hooks", True)
        return d

    @staticmethod
    def _add_hook(hooks, handle, hook, prepend):
        hooks[handle.id] = hook
        if prepend:
            hooks.move_to_end(handle.id, last=False)
        return handle

    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """hook(module, args) -> None or new args (a non-tuple is wrapped in a tuple), run
        before forward; with_kwargs=True: hook(module, args, kwargs) -> None or (args,
        kwargs)."""
        hooks = self._hook_dict("_forward_pre_hooks")
        flags = self._hook_dict("_forward_pre_hooks_with_kwargs")
        handle = RemovableHandle(hooks, extra_dict=flags)
        if with_kwargs:
            flags[handle.id] = True
        return self._add_hook(hooks, handle, hook, prepend)

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False,
                              always_call=False):
        """hook(module, args, output) -> None or a new output, run after forward;
        with_kwargs=True: hook(module, args, kwargs, output); always_call=True: run even
        when forward raises."""
        hooks = self._hook_dict("_forward_hooks")
        flags = self._hook_dict("_forward_hooks_with_kwargs")
        always = self._hook_dict("_forward_hooks_always_called")
        handle = RemovableHandle(hooks, extra_dict=[flags, always])
        if with_kwargs:
            flags[handle.id] = True
        if always_call:
            always[handle.id] = True
        return self._add_hook(hooks, handle, hook, prepend)

    def register_full_backward_pre_hook(self, hook, prepend=False):
        """hook(module, grad_output) -> None or new grad_output, run when the gradients
        with respect to the module's outputs are computed."""
        hooks = self._hook_dict("_backward_pre_hooks")
        return self._add_hook(hooks, RemovableHandle(hooks), hook, prepend)

    def register_full_backward_hook(self, hook, prepend=False):
        """hook(module, grad_input, grad_output) -> None or new grad_input, run when the
        gradients with respect to the module's (positional tensor) inputs are computed;
        grad_input holds None for inputs that are not tensors requiring grad."""
        self._backward_hook_kind(True)
        hooks = self._hook_dict("_backward_hooks")
        return self._add_hook(hooks, RemovableHandle(hooks), hook, prepend)

    def register_backward_hook(self, hook):
        """The deprecated non-full hook, as PyTorch's: hook(module, grad_input, grad_output)
        -> None or new grad_input, a hook of the node that made the module's (first) output
        tensor, so grad_input are that node's input gradients."""
        self._backward_hook_kind(False)
        hooks = self._hook_dict("_non_full_backward_hooks")
        return self._add_hook(hooks, RemovableHandle(hooks), hook, False)

    def _backward_hook_kind(self, full):
        if self.__dict__.get("_is_full_backward_hook", full) is not full:
            raise RuntimeError("Cannot use both regular backward hooks and full backward hooks "
                               "on a single Module. Please use only one of them.")
        object.__setattr__(self, "_is_full_backward_hook", full)

    def _call_with_hooks(self, args, kwargs):
        """A call of a module that has hooks: pre-hooks, the backward hook's identity on the
        inputs, forward, forward hooks, the identity on the outputs; hooks registered with
        always_call run even when forward raises."""
        result = None
        called_always = set()
        if not _global.call_hooks():    # (the last global hook removed: the plain call path)
            ModuleHooks._has_hooks = False
        try:
            for hook_id, hook in (*_global.forward_pre.items(), *self._forward_pre_hooks.items()):
                if hook_id in self._forward_pre_hooks_with_kwargs:
                    r = hook(self, args, kwargs)
                    if r is not None:
                        if isinstance(r, tuple) and len(r) == 2:
                            args, kwargs = r
                        else:
                            raise RuntimeError("forward pre-hook must return None or a tuple "
                                               f"of (new_args, new_kwargs), but got {r}.")
                else:
                    r = hook(self, args)
                    if r is not None:
                        args = r if isinstance(r, tuple) else (r,)
            bw_hook = None
            full = [*(_global.backward.values() if _global.backward_kind["full"] else ()),
                    *self._backward_hooks.values()]
            pre = [*_global.backward_pre.values(), *self._backward_pre_hooks.values()]
            if full or pre:
                _note_backward_hooks(self)
                bw_hook = BackwardHook(self, full, pre)
                args = bw_hook.setup_input_hook(args)
            result = self.forward(*args, **kwargs)
            for hook_id, hook in (*_global.forward.items(), *self._forward_hooks.items()):
                if hook_id in self._forward_hooks_always_called or \
                        hook_id in _global.forward_always_called:
                    called_always.add(hook_id)
                if hook_id in self._forward_hooks_with_kwargs or \
                        hook_id in _global.forward_with_kwargs:
                    r = hook(self, args, kwargs, result)
                else:
                    r = hook(self, args, result)
                if r is not None:
                    result = r
            if bw_hook is not None:
                if not isinstance(result, (Tensor, tuple)):
                    warnings.warn("For backward hooks to be called, module output should be a "
                                  "Tensor or a tuple of Tensors but received "
                                  f"{type(result)}", stacklevel=3)
                result = bw_hook.setup_output_hook(result)
            if self._non_full_backward_hooks or \
                    (_global.backward and _global.backward_kind["full"] is False):
                _hook_output_node(self, args, result)
            return result
        except Exception:
            for hook_id, hook in (*_global.forward.items(), *self._forward_hooks.items()):
                if (hook_id in self._forward_hooks_always_called or hook_id in
                        _global.forward_always_called) and hook_id not in called_always:
                    try:
                        if hook_id in self._forward_hooks_with_kwargs or \
                                hook_id in _global.forward_with_kwargs:
                            r = hook(self, args, kwargs, result)
                        else:
                            r = hook(self, args, result)
                        if r is not None:
                            result = r
                    except Exception as e:
                        warnings.warn("module forward hook with ``always_call=True`` raised an "
                                      "exception that was silenced as another error was raised "
                                      f"in forward: {e}", stacklevel=3)
            raise


def _hook_output_node(module, args, result):
    """Register the module's non-full backward hooks on the node of its first output tensor,
    with PyTorch's warnings where they miss gradients."""
    var = result
    while not isinstance(var, Tensor):
        var = next(v for v in var.values() if isinstance(v, Tensor)) if isinstance(var, dict) \
            else var[0]
    grad_fn = var.grad_fn
    if grad_fn is None:
        return
    hooks = (*(_global.backward.values() if _global.backward_kind["full"] is False else ()),
             *module._non_full_backward_hooks.values())
    for hook in hooks:
        grad_fn.register_hook(lambda gi, go, hook=hook: hook(module, gi, go))
    outs = (result,) if isinstance(result, Tensor) else result
    end = ("is deprecated and will be removed in future versions. This hook will be missing "
           "some {} Please use register_full_backward_hook to get the documented behavior.")
    if not (isinstance(outs, tuple) and all(isinstance(r, Tensor) for r in outs)):
        msg = ("Using non-full backward hooks on a Module that does not return a single Tensor "
               "or a tuple of Tensors " + end.format("of the grad_output."))
    elif not all(isinstance(i, Tensor) for i in args):
        msg = ("Using non-full backward hooks on a Module that does not take as input a single "
               "Tensor or a tuple of Tensors " + end.format("of the grad_input."))
    else:
        fns = {r.grad_fn for r in outs if r.grad_fn is not None}
        if not fns or (len(fns) == 1 and grad_fn not in fns):
            msg = ("Using a non-full backward hook when outputs are nested in python data "
                   "structure " + end.format("grad_output.").split(" Please")[0])
        elif len(fns) > 1:
            msg = ("Using a non-full backward hook when outputs are generated by different "
                   "autograd Nodes " + end.format("grad_output."))
        elif {i.grad_fn for i in args if i.grad_fn is not None} != \
                {n[0] for n in grad_fn.next_functions}:
            msg = ("Using a non-full backward hook when the forward contains multiple autograd "
                   "Nodes " + end.format("grad_input."))
        else:
            return
    warnings.warn(msg, FutureWarning, stacklevel=4)
