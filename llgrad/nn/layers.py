"""Layers with PyTorch's constructor signatures, initialisations, extra_repr and state_dict keys.

This file holds the simple layers (Identity, Linear, Flatten/Unflatten, activations, Dropout) and
re-exports the rest: containers (layers_container), convolution and pooling (layers_conv),
normalisation and embedding (layers_norm) and losses (layers_loss)."""
import warnings

from ..runtime.creation import empty
from . import functional as F
from . import init
from .factory import factory_kwargs
from .layers_container import ModuleDict, ModuleList, Sequential
from .layers_conv import Conv2d, MaxPool2d
from .layers_loss import BCEWithLogitsLoss, CrossEntropyLoss, MSELoss, NLLLoss
from .layers_norm import BatchNorm1d, BatchNorm2d, Embedding, LayerNorm
from .module import Module, Parameter

__all__ = ["Identity", "Linear", "Flatten", "Unflatten", "ReLU", "GELU", "SiLU", "Tanh", "Sigmoid",
           "Softmax", "LogSoftmax", "Dropout", "Sequential", "ModuleList", "ModuleDict", "Conv2d",
           "MaxPool2d", "BatchNorm1d", "BatchNorm2d", "LayerNorm", "Embedding", "CrossEntropyLoss",
           "MSELoss", "BCEWithLogitsLoss", "NLLLoss"]


class Identity(Module):
    """A placeholder that returns its input; its arguments are ignored (as in PyTorch)."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    """y = x @ weight.T + bias, as torch.nn.Linear (PyTorch's initialisation, from llgrad's
    generator)."""
    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        kw = factory_kwargs(device, dtype)
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(empty((out_features, in_features), **kw))
        if bias:
            self.bias = Parameter(empty(out_features, **kw))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        """Re-initialise the parameters as PyTorch does (random values from llgrad's
        generator)."""
        init._reset_weight_and_bias(self.weight, self.bias)

    def forward(self, input):
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class Flatten(Module):
    """Flatten dims start_dim..end_dim into one, as torch.nn.Flatten."""
    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input):
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Unflatten dim into unflattened_size, as torch.nn.Unflatten."""
    def __init__(self, dim, unflattened_size):
        super().__init__()
        if not isinstance(dim, int):
            raise TypeError(f"invalid argument type for dim parameter: {type(dim).__name__}")
        if not isinstance(unflattened_size, (tuple, list)):
            raise TypeError("unflattened_size must be tuple of ints, but found type "
                            f"{type(unflattened_size).__name__}")
        for i, s in enumerate(unflattened_size):
            if not isinstance(s, int):
                raise TypeError("unflattened_size must be tuple of ints, but found element of "
                                f"type {type(s).__name__} at pos {i}")
        self.dim = dim
        self.unflattened_size = unflattened_size

    def forward(self, input):
        return input.unflatten(self.dim, self.unflattened_size)

    def extra_repr(self):
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


# ---- activations ---------------------------------------------------------------------------------
class ReLU(Module):
    """As torch.nn.ReLU."""
    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.relu(input, inplace=self.inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class GELU(Module):
    """As torch.nn.GELU (approximate='none' or 'tanh')."""
    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self):
        return f"approximate={repr(self.approximate)}"


class SiLU(Module):
    """As torch.nn.SiLU."""
    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.silu(input, inplace=self.inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class Tanh(Module):
    """As torch.nn.Tanh."""
    def forward(self, input):
        return input.tanh()


class Sigmoid(Module):
    """As torch.nn.Sigmoid."""
    def forward(self, input):
        return input.sigmoid()


def _softmax_dim(name, ndim):
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call to "
                  "include dim=X as an argument.", stacklevel=3)
    return 0 if ndim in (0, 1, 3) else 1


class Softmax(Module):
    """As torch.nn.Softmax."""
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        dim = self.dim if self.dim is not None else _softmax_dim("softmax", input.ndim)
        return F.softmax(input, dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class LogSoftmax(Module):
    """As torch.nn.LogSoftmax."""
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        dim = self.dim if self.dim is not None else _softmax_dim("log_softmax", input.ndim)
        return F.log_softmax(input, dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class Dropout(Module):
    """As torch.nn.Dropout (in training mode; its mask is drawn from llgrad's generator, so
    compiled calls replay eager's masks, not PyTorch's)."""
    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def forward(self, input):
        return F.dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"
