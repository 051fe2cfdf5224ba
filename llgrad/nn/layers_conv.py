"""Conv2d and MaxPool2d (PyTorch's parameters, checks and extra_repr) over F.conv2d and
F.max_pool2d, which functional_conv defines below the layers and this module re-exports."""
from .functional_conv import _pair, conv2d, max_pool2d
from .layers_conv_base import _ConvNd
from .module import Module

__all__ = ["Conv2d", "MaxPool2d", "conv2d", "max_pool2d"]


class Conv2d(_ConvNd):
    """As torch.nn.Conv2d (padding_mode, groups, dilation, padding='same'/'valid'; PyTorch's
    initialisation from llgrad's generator)."""
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", device=None, dtype=None):
        padding = padding if isinstance(padding, str) else _pair(padding)
        super().__init__(in_channels, out_channels, _pair(kernel_size), _pair(stride), padding,
                         _pair(dilation), False, (0, 0), groups, bias, padding_mode, device,
                         dtype)

    def forward(self, input):
        self._check_padding_rank(input)
        return conv2d(input, self.weight, self.bias, self.stride, self.padding, self.dilation,
                      self.groups, self.padding_mode)


class MaxPool2d(Module):
    """As torch.nn.MaxPool2d."""
    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
                 ceil_mode=False):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if (stride is not None) else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def forward(self, input):
        return max_pool2d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                          ceil_mode=self.ceil_mode, return_indices=self.return_indices)

    def extra_repr(self):
        return ("kernel_size={kernel_size}, stride={stride}, padding={padding}"
                ", dilation={dilation}, ceil_mode={ceil_mode}".format(**self.__dict__))
