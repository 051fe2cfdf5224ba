"""Power-average pooling, max unpooling and fractional max pooling modules: LPPool1d/2d,
MaxUnpool1d/2d, FractionalMaxPool2d/3d (PyTorch's constructor arguments, attributes and
extra_repr) over llgrad.nn.functional."""
from . import functional_fractional as FF, functional_pool_more as FP
from .module import Module

__all__ = ["LPPool1d", "LPPool2d", "MaxUnpool1d", "MaxUnpool2d", "FractionalMaxPool2d",
           "FractionalMaxPool3d"]


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


class _FractionalMaxPoolNd(Module):
    _nd = 2

    def __init__(self, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                 _random_samples=None):
        super().__init__()
        n, name = self._nd, type(self).__name__
        self.kernel_size = _tuple(kernel_size, n)
        self.return_indices = return_indices
        self.register_buffer("_random_samples", _random_samples)
        self.output_size = _tuple(output_size, n) if output_size is not None else None
        self.output_ratio = _tuple(output_ratio, n) if output_ratio is not None else None
        if output_size is None and output_ratio is None:
            raise ValueError(f"{name} requires specifying either an output size, or a pooling "
                             "ratio")
        if output_size is not None and output_ratio is not None:
            raise ValueError("only one of output_size and output_ratio may be specified")
        if self.output_ratio is not None and not all(0 < r < 1 for r in self.output_ratio):
            raise ValueError(f"output_ratio must be between 0 and 1 (got {output_ratio})")

    def forward(self, input):
        fn = FF.fractional_max_pool2d if self._nd == 2 else FF.fractional_max_pool3d
        return fn(input, self.kernel_size, self.output_size, self.output_ratio,
                  self.return_indices, _random_samples=self._random_samples)


def _tuple(x, n):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,) * n


class FractionalMaxPool2d(_FractionalMaxPoolNd):
    """As torch.nn.FractionalMaxPool2d: max pooling over windows placed at random fractional
    strides (F.fractional_max_pool2d)."""
    _nd = 2


class FractionalMaxPool3d(_FractionalMaxPoolNd):
    """As torch.nn.FractionalMaxPool3d: max pooling over windows placed at random fractional
    strides (F.fractional_max_pool3d)."""
    _nd = 3
