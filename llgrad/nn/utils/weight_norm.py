"""The hook form of weight normalisation (torch.nn.utils.weight_norm / remove_weight_norm,
deprecated in PyTorch in favour of parametrizations.weight_norm, with its FutureWarning):
weight_g and weight_v are the parameters, and a forward pre-hook sets module.weight =
g * v / ||v|| before each call."""
import warnings

from ..parameter import Parameter
from .parametrizations import _weight_norm, norm_except_dim

__all__ = ["weight_norm", "remove_weight_norm", "WeightNorm"]


class WeightNorm:
    """The forward pre-hook of weight_norm."""

    def __init__(self, name, dim):
        self.name = name
        self.dim = -1 if dim is None else dim

    def compute_weight(self, module):
        g = getattr(module, self.name + "_g")
        v = getattr(module, self.name + "_v")
        return _weight_norm(v, g, self.dim)

    @staticmethod
    def apply(module, name, dim):
        for hook in getattr(module, "_forward_pre_hooks", {}).values():
            if isinstance(hook, WeightNorm) and hook.name == name:
                raise RuntimeError(f"Cannot register two weight_norm hooks on the same parameter "
                                   f"{name}")
        fn = WeightNorm(name, dim)
        weight = getattr(module, name)
        del module._parameters[name]
        module.register_parameter(name + "_g", Parameter(norm_except_dim(weight, 2,
                                                                         fn.dim).detach()))
        module.register_parameter(name + "_v", Parameter(weight.detach()))
        setattr(module, name, fn.compute_weight(module))
        fn.handle = module.register_forward_pre_hook(fn)
        return fn

    def remove(self, module):
        weight = self.compute_weight(module)
        delattr(module, self.name)
        del module._parameters[self.name + "_g"]
        del module._parameters[self.name + "_v"]
        setattr(module, self.name, Parameter(weight.detach()))
        self.handle.remove()

    def __call__(self, module, inputs):
        setattr(module, self.name, self.compute_weight(module))


def weight_norm(module, name="weight", dim=0):
    """Split module.<name> into <name>_g (its norm) and <name>_v (its direction)."""
    warnings.warn("`torch.nn.utils.weight_norm` is deprecated in favor of "
                  "`torch.nn.utils.parametrizations.weight_norm`.", FutureWarning, stacklevel=2)
    WeightNorm.apply(module, name, dim)
    return module


def remove_weight_norm(module, name="weight"):
    """Undo weight_norm: module.<name> becomes one parameter again (its current value)."""
    for hook in list(getattr(module, "_forward_pre_hooks", {}).values()):
        if isinstance(hook, WeightNorm) and hook.name == name:
            hook.remove(module)
            return module
    raise ValueError(f"weight_norm of '{name}' not found in {module}")
