"""Module's lookups by dotted path (get_submodule, get_parameter, get_buffer), and its
state_dict and load_state_dict as PyTorch runs them: module by module (_save_to_state_dict,
_load_from_state_dict, which subclasses override), each module's version in the state
dict's _metadata, the state-dict hooks, extra state, assign=True, and PyTorch's messages
(size mismatches, missing and unexpected keys collected and raised together)."""
from __future__ import annotations

import warnings
from collections import OrderedDict
from collections.abc import Mapping

from ..runtime import grad_mode
from ..runtime.tensor import Tensor
from ..utils.hooks import RemovableHandle
from .parameter import Parameter

_EXTRA = "_extra_state"


class _IncompatibleKeys(tuple):
    def __new__(cls, missing, unexpected):
        t = super().__new__(cls, (missing, unexpected))
        t.missing_keys, t.unexpected_keys = missing, unexpected
        return t

    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return (f"_IncompatibleKeys(missing_keys={self.missing_keys}, "
                f"unexpected_keys={self.unexpected_keys})")


class ModuleAccess:
    """Mixin of Module: path lookups and load_state_dict."""

    def get_submodule(self, target: str):
        """The submodule at the dotted path target ("" is self), as
        torch.nn.Module.get_submodule."""
        if target == "":
            return self
        mod = self
        for item in target.split("."):
            if not hasattr(mod, item):
                raise AttributeError(mod._get_name() + " has no attribute `" + item + "`")
            mod = getattr(mod, item)
            if not isinstance(mod, ModuleAccess):
                raise AttributeError("`" + item + "` is not an nn.Module")
        return mod

    def set_submodule(self, target: str, module, strict: bool = False) -> None:
        """Put module at the dotted path target (its parent must exist; with strict, the
        name too), as torch.nn.Module.set_submodule."""
        if target == "":
            raise ValueError("Cannot set the submodule without a target name!")
        path, _, name = target.rpartition(".")
        if not isinstance(module, ModuleAccess):
            raise ValueError(f"`module` is not an nn.Module, found {type(module)}")
        parent = self.get_submodule(path)
        if strict and not hasattr(parent, name):
            raise AttributeError(parent._get_name() + " has no attribute `" + name + "`")
        if hasattr(parent, name) and not isinstance(getattr(parent, name), ModuleAccess):
            raise AttributeError("`" + name + "` is not an nn.Module")
        setattr(parent, name, module)

    def _get_name(self):
        return type(self).__name__

    def _get_member(self, target, store, what):
        path, _, name = target.rpartition(".")
        mod = self.get_submodule(path)
        if not hasattr(mod, name):
            raise AttributeError(mod._get_name() + " has no attribute `" + name + "`")
        if name not in getattr(mod, store):
            raise AttributeError("`" + name + "` is not " + what)
        return getattr(mod, store)[name]

    def get_parameter(self, target: str):
        """The parameter at the dotted path target, as torch.nn.Module.get_parameter."""
        return self._get_member(target, "_parameters", "an nn.Parameter")

    def get_buffer(self, target: str):
        """The buffer at the dotted path target, as torch.nn.Module.get_buffer."""
        return self._get_member(target, "_buffers", "a buffer")

    # ---- state dicts -------------------------------------------------------------------------
    _version = 1

    def _hooks(self, name):
        """The module's hook dict `name`, made on first use (no forward-hook flag)."""
        d = self.__dict__.get(name)
        if d is None:
            d = OrderedDict()
            object.__setattr__(self, name, d)
        return d

    def _add_state_hook(self, name, hook, public=False):
        hooks = self._hooks(name)
        handle = RemovableHandle(hooks)
        hooks[handle.id] = (hook, public)
        return handle

    def register_state_dict_pre_hook(self, hook):
        """hook(module, prefix, keep_vars), run before the module's state_dict."""
        return self._add_state_hook("_state_dict_pre_hooks", hook)

    def register_state_dict_post_hook(self, hook):
        """hook(module, state_dict, prefix, local_metadata) -> None, run after it."""
        return self._add_state_hook("_state_dict_hooks", hook, public=True)

    def _register_state_dict_hook(self, hook):
        """As register_state_dict_post_hook; the hook may return a new state dict."""
        return self._add_state_hook("_state_dict_hooks", hook)

    def register_load_state_dict_pre_hook(self, hook):
        """hook(module, state_dict, prefix, local_metadata, strict, missing_keys,
        unexpected_keys, error_msgs), run before the module loads."""
        return self._add_state_hook("_load_state_dict_pre_hooks", hook, public=True)

    def _register_load_state_dict_pre_hook(self, hook, with_module=False):
        return self._add_state_hook("_load_state_dict_pre_hooks", hook, public=with_module)

    def register_load_state_dict_post_hook(self, hook):
        """hook(module, incompatible_keys) -> None, run once the module and its children
        have loaded (it may edit the key lists)."""
        return self._add_state_hook("_load_state_dict_post_hooks", hook)

    def get_extra_state(self):
        raise RuntimeError("Reached a code path in Module.get_extra_state() that should never "
                           "be called. Please file an issue at https://github.com/pytorch/"
                           "pytorch/issues/new?template=bug-report.yml to report this bug.")

    def set_extra_state(self, state):
        raise RuntimeError("Reached a code path in Module.set_extra_state() that should never "
                           "be called. Please file an issue at https://github.com/pytorch/"
                           "pytorch/issues/new?template=bug-report.yml to report this bug.")

    def _has_extra(self, what):
        return getattr(type(self), what) is not getattr(ModuleAccess, what)

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        for n, t in self._parameters.items():
            if t is not None:
                destination[prefix + n] = t if keep_vars else t.detach()
        for n, t in self._buffers.items():
            if t is not None and n not in self._non_persistent:
                destination[prefix + n] = t if keep_vars else t.detach()
        if self._has_extra("get_extra_state"):
            destination[prefix + _EXTRA] = self.get_extra_state()

    def state_dict(self, *args: object, destination: dict | None = None, prefix: str = "",
                   keep_vars: bool = False) -> OrderedDict[str, Tensor]:
        """An OrderedDict of parameters and persistent buffers by dotted name (detached
        unless keep_vars), as torch.nn.Module.state_dict: a shared submodule's tensors
        appear under each of its names."""
        if args:
            warnings.warn("Positional args are being deprecated, use kwargs instead. Refer to "
                          "https://pytorch.org/docs/main/generated/torch.nn.Module.html#torch."
                          "nn.Module.state_dict for details.", FutureWarning, stacklevel=2)
            destination, prefix, keep_vars = (args + (destination, prefix, keep_vars)[
                len(args):])[:3]
        if destination is None:
            destination = OrderedDict()
            destination._metadata = OrderedDict()
        result = destination
        stack = [(self, prefix, None)]
        while stack:            # pre-order; post hooks once the children are done
            m, p, meta = stack.pop()
            if meta is not None:
                for hook, public in m.__dict__.get("_state_dict_hooks", {}).values():
                    out = hook(m, destination, p, meta)
                    if public and out is not None:
                        raise RuntimeError("state_dict post-hook must return None")
                    if out is not None and m is self:
                        result = out
                continue
            meta = {"version": m._version}
            if hasattr(destination, "_metadata"):
                destination._metadata[p[:-1]] = meta
            for hook, _ in m.__dict__.get("_state_dict_pre_hooks", {}).values():
                hook(m, p, keep_vars)
            m._save_to_state_dict(destination, p, keep_vars)
            stack.append((m, p, meta))
            stack.extend((c, p + n + ".", None) for n, c in reversed(m._modules.items())
                         if c is not None)
        return result

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        """Load this module's own parameters and buffers from state_dict (keys prefix +
        name), as torch.nn.Module._load_from_state_dict."""
        for hook, with_module in self.__dict__.get("_load_state_dict_pre_hooks", {}).values():
            args = (state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                    error_msgs)
            hook(self, *args) if with_module else hook(*args)
        local = [(n, t) for n, t in self._parameters.items() if t is not None]
        local += [(n, t) for n, t in self._buffers.items()
                  if t is not None and n not in self._non_persistent]
        assign = local_metadata.get("assign_to_params_buffers", False)
        for name, param in local:
            key = prefix + name
            if key not in state_dict:
                if strict:
                    missing_keys.append(key)
                continue
            src = state_dict[key]
            if not isinstance(src, Tensor):
                error_msgs.append(f'While copying the parameter named "{key}", expected '
                                  "llgrad.Tensor or Tensor-like object from checkpoint but "
                                  f"received {type(src)}")
                continue
            lazy = hasattr(param, "materialize")
            if lazy and not hasattr(src, "materialize"):
                param.materialize(tuple(src.shape))
                lazy = False
            if lazy and not assign:     # uninitialized into uninitialized: nothing to copy
                continue
            if not lazy and param.dim() == 0 and src.dim() == 1 and src.shape[0] == 1:
                src = src[0]            # (PyTorch 0.3's 1-element checkpoints)
            if not lazy and tuple(src.shape) != tuple(param.shape):
                error_msgs.append(f"size mismatch for {key}: copying a param with shape "
                                  f"{src.shape} from checkpoint, the shape in current model "
                                  f"is {param.shape}.")
                continue
            try:
                with grad_mode.no_grad():
                    if assign:
                        if isinstance(param, Parameter):
                            if isinstance(src, Parameter):
                                src.requires_grad_(param.requires_grad)
                            else:
                                src = Parameter(src, requires_grad=param.requires_grad)
                        setattr(self, name, src)
                    else:
                        if param.is_meta and not src.is_meta:
                            warnings.warn(f"for {key}: copying from a non-meta parameter in "
                                          "the checkpoint to a meta parameter in the current "
                                          "model, which is a no-op. (Did you mean to pass "
                                          "`assign=True` to assign items in the state "
                                          "dictionary to their corresponding key in the "
                                          "module instead of copying them in place?)",
                                          UserWarning, stacklevel=2)
                        param.copy_(src)
            except Exception as ex:
                error_msgs.append(f'While copying the parameter named "{key}", whose '
                                  f"dimensions in the model are {param.size()} and whose "
                                  f"dimensions in the checkpoint are {src.size()}, an "
                                  f"exception occurred : {ex.args}.")
        if self._has_extra("set_extra_state"):
            if prefix + _EXTRA in state_dict:
                self.set_extra_state(state_dict[prefix + _EXTRA])
            elif strict:
                missing_keys.append(prefix + _EXTRA)
        elif strict and prefix + _EXTRA in state_dict:     # (no set_extra_state to take it)
            unexpected_keys.append(prefix + _EXTRA)
        if strict:
            names = {n for n, _ in local}
            for key in state_dict:
                if key.startswith(prefix) and key != prefix + _EXTRA:
                    first, *rest = key[len(prefix):].split(".", 1)
                    if (first not in self._modules) if rest else (first not in names):
                        unexpected_keys.append(key)

    def load_state_dict(self, state_dict: Mapping[str, object], strict: bool = True,
                        assign: bool = False) -> _IncompatibleKeys:
        """Copy tensors from state_dict into the parameters and buffers (in place, under
        no_grad; assign=True: the checkpoint's tensors become them); returns
        (missing_keys, unexpected_keys); a size mismatch raises, and strict=True raises on
        missing or unexpected keys, as torch.nn.Module.load_state_dict."""
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        missing, unexpected, errors = [], [], []
        metadata = getattr(state_dict, "_metadata", None)
        stack = [(self, OrderedDict(state_dict), "", False)]
        while stack:            # pre-order; post hooks once the children are done
            m, sd, p, done = stack.pop()
            if done:
                keys = _IncompatibleKeys(missing, unexpected)
                for hook, _ in m.__dict__.get("_load_state_dict_post_hooks", {}).values():
                    if hook(m, keys) is not None:
                        raise AssertionError(
                            "Hooks registered with ``register_load_state_dict_post_hook`` "
                            "are not expected to return new values, if incompatible_keys "
                            "need to be modified, it should be done inplace.")
                continue
            local_metadata = {} if metadata is None else dict(metadata.get(p[:-1], {}))
            if assign:
                local_metadata["assign_to_params_buffers"] = assign
            m._load_from_state_dict(sd, p, local_metadata, True, missing, unexpected, errors)
            stack.append((m, sd, p, True))
            for n, c in reversed(m._modules.items()):
                if c is not None:
                    cp = p + n + "."
                    stack.append((c, {k: v for k, v in sd.items() if k.startswith(cp)}, cp,
                                  False))
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in unexpected)))
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in missing)))
        if errors:
            raise RuntimeError("Error(s) in loading state_dict for {}:\n\t{}".format(
                type(self).__name__, "\n\t".join(errors)))
        return _IncompatibleKeys(missing, unexpected)
