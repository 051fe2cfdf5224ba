"""Module's lookups by dotted path (get_submodule, get_parameter, get_buffer) and its
load_state_dict, with PyTorch's messages: size mismatches, missing and unexpected keys are
collected and raised together."""
from __future__ import annotations

from ..runtime import grad_mode


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

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """Copy tensors from state_dict into the parameters and buffers (in place, under
        no_grad); returns (missing_keys, unexpected_keys); a size mismatch raises, and
        strict=True raises on missing or unexpected keys, as torch.nn.Module.load_state_dict
        (a shared submodule's tensors are loaded under each of its names)."""
        if assign:
            raise NotImplementedError("llgrad: load_state_dict(assign=True) is not supported")
        own = self.state_dict(keep_vars=True)
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        errors = []
        with grad_mode.no_grad():
            for k, t in own.items():
                if k not in state_dict:
                    continue
                src = state_dict[k]
                if hasattr(t, "materialize") and not hasattr(src, "materialize"):
                    t.materialize(tuple(src.shape))     # (a lazy module's parameter)
                if tuple(src.shape) != tuple(t.shape):
                    errors.append(f"size mismatch for {k}: copying a param with shape "
                                  f"{src.shape} from checkpoint, the shape in current model "
                                  f"is {t.shape}.")
                    continue
                t.copy_(src)
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
