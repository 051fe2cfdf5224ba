"""Power-average pooling and max unpooling modules: LPPool1d/2d and MaxUnpool1d/2d
(PyTorch's constructor arguments, attributes and extra_repr) over llgrad.nn.functional."""
from . import functional_pool_more as FP
from .module import Module

__all__ = ["LPPool1d", "LPPool2d", "MaxUnpool1d", "MaxUnpool2d"]


def _single(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _pair(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x, x)


class _LPPoolNd(Module):
    def __init__(self, norm_type, kernel_size, stride=None, ceil_mode=False):
        super().__init__()
        self.norm_type = norm_type
        self.kernel_size = kernel_size
        self.stride = stride
        self.ceil_mode = ceil_mode

    def extra_repr(self):
        return (f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, ceil_mode={self.ceil_mode}")


class LPPool1d(_LPPoolNd):
    """As torch.nn.LPPool1d: (sum over each window of x^p)^(1/p)."""
    def forward(self, input):
        return FP.lp_pool1d(input, float(self.norm_type), self.kernel_size, self.stride,
                            self.ceil_mode)


class LPPool2d(_LPPoolNd):
    """As torch.nn.LPPool2d: (sum over each window of x^p)^(1/p)."""
    def forward(self, input):
        return FP.lp_pool2d(input, float(self.norm_type), self.kernel_size, self.stride,
                            self.ceil_mode)


class _MaxUnpoolNd(Module):
    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(_MaxUnpoolNd):
    """As torch.nn.MaxUnpool1d: MaxPool1d's partial inverse, given its indices."""
    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        self.kernel_size = _single(kernel_size)
        self.stride = _single(stride if stride is not None else kernel_size)
        self.padding = _single(padding)

    def forward(self, input, indices, output_size=None):
        return FP.max_unpool1d(input, indices, self.kernel_size, self.stride, self.padding,
                               output_size)


class MaxUnpool2d(_MaxUnpoolNd):
    """As torch.nn.MaxUnpool2d: MaxPool2d's partial inverse, given its indices."""
    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        self.kernel_size = _pair(kernel_size)
        self.stride = _pair(stride if stride is not None else kernel_size)
        self.padding = _pair(padding)

    def forward(self, input, indices, output_size=None):
        return FP.max_unpool2d(input, indices, self.kernel_size, self.stride, self.padding,
                               output_size)
