"""Module with PyTorch's semantics: parameters, buffers and submodules are registered by
attribute assignment; train()/eval() set `training` recursively; state_dict() and
load_state_dict() name tensors by their dotted paths. Hooks are ModuleHooks' (module_hooks);
a call of a module without hooks is a plain call of forward."""
from __future__ import annotations
import inspect
from collections import OrderedDict
from typing import TYPE_CHECKING

from ..runtime import global_module_hooks as _global, grad_mode
from ..runtime.functions_settings import typename
from ..runtime.tensor import Tensor
from ..runtime.training_flag import TrainingFlag, read_past
from .module_access import ModuleAccess, _IncompatibleKeys  # noqa: F401
from .module_convert import ModuleConvert
from .module_hooks import ModuleHooks
from .parameter import Parameter

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping

__all__ = ["Module", "Parameter"]
_NO_STORE = frozenset()     # (Module.__getattr__'s stand-in for a store not made yet)


def _typename(v):
    """torch.typename's spelling: a tensor's type() (llgrad.FloatTensor), else the class
    with its module (numpy.ndarray; builtins' bare: int)."""
    return typename(v)


def _check_name(module, name, kind, store):
    """register_parameter's checks of name, with PyTorch's errors."""
    if not isinstance(name, str):
        raise TypeError(f"{kind} name should be a string. Got {_typename(name)}")
    if "." in name:
        raise KeyError(f'{kind} name can\'t contain "."')
    if name == "":
        raise KeyError(f'{kind} name can\'t be empty string ""')
    if hasattr(module, name) and name not in store:
        raise KeyError(f"attribute '{name}' already exists")



def _register_buffer_compat(module, name, value, persistent):
    """module.register_buffer(name, value, persistent), also for subclasses whose
    register_buffer override lacks persistent (PyTorch's allowance: persistent only)."""
    if getattr(module.register_buffer, "__func__", None) is Module.register_buffer \
            or "persistent" in inspect.signature(module.register_buffer).parameters:
        module.register_buffer(name, value, persistent)
    elif not persistent:
        raise RuntimeError("Registering a non-persistent buffer on a Module subclass that "
                           "implements register_buffer() without the persistent argument "
                           "is not allowed.")
    else:
        module.register_buffer(name, value)


def _registered(hooks, module, name, value):
    """value after the global registration hooks (register_module_*_registration_hook)."""
    return _global.registered(hooks, module, name, value) if hooks else value

class Module(ModuleConvert, ModuleAccess, ModuleHooks):
    """Base class of layers and models, as torch.nn.Module.

    Parameters, buffers and submodules are registered by attribute assignment;
    train()/eval() set `training` recursively; state_dict() and load_state_dict() use
    PyTorch's dotted names, so state dicts interchange with PyTorch's (llgrad.save /
    llgrad.load). A call without hooks is a plain call of forward. The device is always the
    CPU: to('cuda') and cuda() raise. llgrad.compile(module) returns a module-like object
    whose calls run compiled."""
    training = TrainingFlag()   # (in the instance's __dict__; compile sees a step set it)
    # (PyTorch's name for the set, which code written for it reads and writes)
    _non_persistent_buffers_set = property(lambda self: self._non_persistent)

    def __getstate__(self):
        """The instance's __dict__ (object's default), the flag in it noted as read
        (training_flag.read_past: a traced copy reads it past the descriptor)."""
        read_past(self)
        return self.__dict__

    def __setstate__(self, state):
        """object's default (state into __dict__), here so that a subclass's __setstate__
        can call super().__setstate__ as in PyTorch; stores an older pickle lacks start
        empty."""
        self.__dict__.update(state)
        for name, empty in (("_parameters", OrderedDict), ("_buffers", OrderedDict),
                            ("_non_persistent", set), ("_modules", OrderedDict)):
            if name not in self.__dict__:
                object.__setattr__(self, name, empty())

    def __init__(self) -> None:
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent", set())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "training", True)

    # ---- registration ------------------------------------------------------------------------
    def __setattr__(self, name, value):
        if "_parameters" not in self.__dict__:     # (plain values may come first: PyTorch's)
            if isinstance(value, (Parameter, Module)):
                what = "parameters" if isinstance(value, Parameter) else "module"
                raise AttributeError(f"cannot assign {what} before Module.__init__() call")
            object.__setattr__(self, name, value)
            return
        if isinstance(value, Parameter):
            for store in (self.__dict__, self._modules, self._buffers):
                store.pop(name, None)
            self._non_persistent.discard(name)
            self._parameters[name] = _registered(_global.parameter_registration, self, name, value)
        elif name in self._parameters:      # (a module too: PyTorch's order of checks)
            if value is not None:
                raise TypeError(f"cannot assign '{_typename(value)}' as parameter "
                                f"'{name}' (llgrad.nn.Parameter or None expected)")
            self._parameters[name] = None
        elif isinstance(value, Module):
            for store in (self.__dict__, self._buffers):
                store.pop(name, None)
            self._non_persistent.discard(name)
            self._modules[name] = _registered(_global.module_registration, self, name, value)
        elif name in self._modules:
            if value is not None:
                raise TypeError(f"cannot assign '{_typename(value)}' as child module "
                                f"'{name}' (llgrad.nn.Module or None expected)")
            self._modules[name] = None
        elif isinstance(value, Tensor) and getattr(value, "_is_buffer", False):
            # (an nn.Buffer: registered as a buffer, persistent as it says; a plain attribute
            # of that name is a clash, register_buffer's KeyError)
            _register_buffer_compat(self, name, value, value.persistent)
        elif name in self._buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{_typename(value)}' as buffer '{name}' "
                                "(llgrad.nn.Buffer, llgrad.Tensor or None expected)")
            self._buffers[name] = _registered(_global.buffer_registration, self, name, value)
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name):
        # (unrolled: every read of a parameter or submodule in a forward comes here)
        d = self.__dict__
        s = d.get("_parameters", _NO_STORE)
        if name in s:
            return s[name]
        s = d.get("_buffers", _NO_STORE)
        if name in s:
            return s[name]
        s = d.get("_modules", _NO_STORE)
        if name in s:
            return s[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        for store in (self._parameters, self._buffers, self._modules):
            if name in store:
                del store[name]
                return
        object.__delattr__(self, name)

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Register param (a Parameter or None) under name, as
        torch.nn.Module.register_parameter."""
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        _check_name(self, name, "parameter", self._parameters)
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{_typename(param)}' object to parameter "
                            f"'{name}' (llgrad.nn.Parameter or None required)")
        self._parameters[name] = _registered(_global.parameter_registration, self, name, param)

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """A buffer: state that is not a parameter (in state_dict() unless
        persistent=False; moved by .to(), returned by buffers())."""
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        if not isinstance(name, str):
            raise TypeError(f"buffer name should be a string. Got {type(name).__name__}")
        if "." in name:
            raise KeyError('buffer name can\'t contain "."')
        if name == "":
            raise KeyError('buffer name can\'t be empty string ""')
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{_typename(tensor)}' object to buffer "
                            f"'{name}' (llgrad Tensor or None required)")
        self._buffers[name] = _registered(_global.buffer_registration, self, name, tensor)
        if persistent:
            self._non_persistent.discard(name)
        else:
            self._non_persistent.add(name)

    def add_module(self, name: str, module: Module | None) -> None:
        """Register module as the child name, as torch.nn.Module.add_module."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{_typename(module)} is not a Module subclass")
        if not isinstance(name, str):
            raise TypeError(f"module name should be a string. Got {_typename(name)}")
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        if "." in name:
            raise KeyError(f'module name can\'t contain ".", got: {name}')
        if name == "":
            raise KeyError('module name can\'t be empty string ""')
        self._modules[name] = _registered(_global.module_registration, self, name, module)

    register_module = add_module

    # ---- traversal -----------------------------------------------------------------------------
    def named_modules(self, memo: set | None = None, prefix: str = "",
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Module]]:
        """Depth-first, pre-order; each module once unless remove_duplicate=False
        (iterative: deep nesting cannot overflow)."""
        memo = set() if memo is None else memo
        stack = [(prefix, self)]
        while stack:
            p, m = stack.pop()
            if remove_duplicate:
                if m in memo:       # (the modules themselves: a caller's memo seeds it)
                    continue
                memo.add(m)
            yield p, m
            children = [(f"{p}.{n}" if p else n, c) for n, c in m._modules.items()
                        if c is not None]
            stack.extend(reversed(children))

    def modules(self) -> Iterator[Module]:
        """Every module in the tree, this one first (each once), as torch.nn.Module.modules."""
        for _, m in self.named_modules():
            yield m

    def named_children(self) -> Iterator[tuple[str, Module]]:
        """(name, module) of the direct children, as torch.nn.Module.named_children."""
        memo = set()
        for n, m in self._modules.items():
            if m is not None and id(m) not in memo:
                memo.add(id(m))
                yield n, m

    def children(self) -> Iterator[Module]:
        """The direct child modules, as torch.nn.Module.children."""
        for _, m in self.named_children():
            yield m

    def _named(self, store, recurse=True, prefix="", remove_duplicate=True):
        seen = set()
        mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) \
            if recurse else [(prefix, self)]
        for p, m in mods:
            for n, t in getattr(m, store).items():
                if t is None or (remove_duplicate and id(t) in seen):
                    continue
                seen.add(id(t))
                yield (f"{p}.{n}" if p else n), t

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True) -> Iterator[tuple[str, Parameter]]:
        """(dotted name, parameter) pairs, each parameter once unless remove_duplicate=False,
        as torch.nn.Module.named_parameters."""
        return self._named("_parameters", recurse, prefix, remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        """The parameters of this module and (recurse=True) its descendants, each once,
        as torch.nn.Module.parameters."""
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Tensor]]:
        """(dotted name, buffer) pairs, as torch.nn.Module.named_buffers."""
        return self._named("_buffers", recurse, prefix, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        """The buffers of this module and (recurse=True) its descendants, as
        torch.nn.Module.buffers."""
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    # ---- modes, state ----------------------------------------------------------------------------
    def train(self, mode: bool = True) -> Module:
        """Set training mode (mode=True) or evaluation mode on every module of the tree;
        returns self, as torch.nn.Module.train."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        # A child whose class overrides train (to keep its BatchNorms frozen, say) is called
        # as PyTorch calls it; the rest of the tree is walked here, without recursion.
        seen, stack = set(), [self]
        while stack:
            m = stack.pop()
            if m is not self and type(m).train is not Module.train:
                m.train(mode)
                continue
            object.__setattr__(m, "training", mode)
            for c in reversed(list(m.children())):
                if c in seen:
                    continue
                if type(c).train is Module.train:   # (an override: called once per parent)
                    seen.add(c)
                stack.append(c)
        return self

    def eval(self) -> Module:
        """train(False), as torch.nn.Module.eval."""
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        """Set requires_grad on every parameter; returns self, as
        torch.nn.Module.requires_grad_."""
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the parameters' .grad (to None by default, else to zeros), as
        torch.nn.Module.zero_grad."""
        for p in self.parameters():
            if set_to_none:     # (not read first: a compiled step clearing .grad before any
                p.grad = None   # read serves every .grad state, entry.py's grad_free)
            elif p.grad is None:
                continue
            else:
                p.grad.detach_()
                p.grad.zero_()

    def apply(self, fn: Callable[[Module], None]) -> Module:
        """fn(module) for every submodule, children before their parent (post-order, as
        PyTorch: a module that is the child of two parents is visited under each)."""
        stack = [(self, False)]
        while stack:
            m, expanded = stack.pop()
            if expanded:
                fn(m)
                continue
            stack.append((m, True))
            stack.extend((c, False) for c in reversed(list(m.children())))
        return self

    def forward(self, *args: object, **kwargs: object) -> object:
        """The module's computation, called by module(...) (subclasses define it), as
        torch.nn.Module.forward."""
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required '
                                  '"forward" function')

    # ---- calling and printing -------------------------------------------------------------------
    def __call__(self, *args: object, **kwargs: object) -> object:
        if not self._has_hooks:
            return self.forward(*args, **kwargs)
        return self._call_with_hooks(args, kwargs)

    def extra_repr(self) -> str:
        """The extra text inside this module's repr (its arguments), as
        torch.nn.Module.extra_repr."""
        return ""

    def __repr__(self):
        lines = []
        for name, m in self._modules.items():
            body = repr(m).replace("\n", "\n  ")
            lines.append(f"({name}): {body}")
        extra = self.extra_repr().split("\n") if self.extra_repr() else []
        if not lines and len(extra) <= 1:
            return f"{type(self).__name__}({''.join(extra)})"
        body = extra + lines
        return f"{type(self).__name__}(\n  " + "\n  ".join(body) + "\n)"

    def __dir__(self):
        # (as PyTorch, names that are not identifiers, a Sequential's '0', are left out)
        keys = set(object.__dir__(self)) | set(self._parameters) | set(self._buffers) \
            | set(self._modules)
        return sorted(k for k in keys if not k[0].isdigit())
