"""_ConvNd: what PyTorch's convolution modules share (the checks of their arguments, the
weight and bias, their initialisation and extra_repr), for Conv1d/Conv2d and the
transposed convolutions."""
from ..runtime.creation import empty
from . import init
from .functional_pad import pad
from .factory import factory_kwargs
from .module import Module, Parameter


def ntuple(x, n):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,) * n


class _ConvNd(Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, dilation,
                 transposed, output_padding, groups, bias, padding_mode, device=None,
                 dtype=None):
        super().__init__()
        kw = factory_kwargs(device, dtype)
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        valid_padding_strings = {"same", "valid"}
        if isinstance(padding, str):
            if padding not in valid_padding_strings:
                raise ValueError(f"Invalid padding string {padding!r}, should be one of "
                                 f"{valid_padding_strings}")
            if padding == "same" and any(s != 1 for s in stride):
                raise ValueError("padding='same' is not supported for strided convolutions")
        valid_padding_modes = {"zeros", "reflect", "replicate", "circular"}
        if padding_mode not in valid_padding_modes:
            raise ValueError(f"padding_mode must be one of {valid_padding_modes}, but got "
                             f"padding_mode='{padding_mode}'")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = kernel_size
        self.stride = stride
        self.padding = padding
        self.dilation = dilation
        self.transposed = transposed
        self.output_padding = output_padding
        self.groups = groups
        self.padding_mode = padding_mode
        shape = (in_channels, out_channels // groups) if transposed else \
            (out_channels, in_channels // groups)
        self.weight = Parameter(empty(shape + tuple(kernel_size), **kw))
        if bias:
            self.bias = Parameter(empty(out_channels, **kw))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        """Re-initialise the parameters as PyTorch does (random values from llgrad's
        generator)."""
        init._reset_weight_and_bias(self.weight, self.bias)

    def _check_padding_rank(self, input):
        """PyTorch's module pads for a non-zero padding_mode before the convolution sees the
        input: F.pad's error for an input of a rank the convolution takes not."""
        n = len(self.kernel_size)
        if self.padding_mode != "zeros" and input.dim() not in (n + 1, n + 2):
            pad(input, [0] * (2 * n), mode=self.padding_mode)

    def extra_repr(self):
        s = "{in_channels}, {out_channels}, kernel_size={kernel_size}, stride={stride}"
        if self.padding != (0,) * len(self.padding):
            s += ", padding={padding}"
        if self.dilation != (1,) * len(self.dilation):
            s += ", dilation={dilation}"
        if self.output_padding != (0,) * len(self.output_padding):
            s += ", output_padding={output_padding}"
        if self.groups != 1:
            s += ", groups={groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += ", padding_mode={padding_mode}"
        return s.format(**self.__dict__)
