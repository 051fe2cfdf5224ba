"""PixelShuffle, PixelUnshuffle, ChannelShuffle and Bilinear (PyTorch's parameters,
initialisation and extra_repr) over llgrad/nn/functional_shuffle.py."""
import math

from ..runtime.creation import empty
from . import init
from .factory import factory_kwargs
from .functional_shuffle import bilinear, channel_shuffle, pixel_shuffle, pixel_unshuffle
from .module import Module, Parameter

__all__ = ["PixelShuffle", "PixelUnshuffle", "ChannelShuffle", "Bilinear"]


class PixelShuffle(Module):
    """As torch.nn.PixelShuffle: (*, C r^2, H, W) -> (*, C, H r, W r)."""
    def __init__(self, upscale_factor):
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input):
        return pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self):
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """As torch.nn.PixelUnshuffle: (*, C, H r, W r) -> (*, C r^2, H, W)."""
    def __init__(self, downscale_factor):
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input):
        return pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self):
        return f"downscale_factor={self.downscale_factor}"


class ChannelShuffle(Module):
    """As torch.nn.ChannelShuffle."""
    def __init__(self, groups):
        super().__init__()
        self.groups = groups

    def forward(self, input):
        return channel_shuffle(input, self.groups)

    def extra_repr(self):
        return f"groups={self.groups}"


class Bilinear(Module):
    """y = x1^T A x2 + b, as torch.nn.Bilinear (PyTorch's initialisation: U(-k, k) with
    k = 1 / sqrt(in1_features), from llgrad's generator)."""
    def __init__(self, in1_features, in2_features, out_features, bias=True, device=None,
                 dtype=None):
        super().__init__()
        kw = factory_kwargs(device, dtype)
        self.in1_features, self.in2_features = in1_features, in2_features
        self.out_features = out_features
        self.weight = Parameter(empty((out_features, in1_features, in2_features), **kw))
        if bias:
            self.bias = Parameter(empty(out_features, **kw))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        """Re-initialise the parameters as PyTorch does (random values from llgrad's
        generator)."""
        if self.in1_features <= 0:      # (PyTorch's check: the bound would divide by zero)
            raise ValueError(f"in1_features must be > 0, but got (in1_features="
                             f"{self.in1_features})")
        bound = 1 / math.sqrt(self.weight.size(1))
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1, input2):
        return bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self):
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")
