"""The 3-D layers (PyTorch's constructor arguments, attributes, checks and extra_repr) over
llgrad.nn.functional: Conv3d, ConvTranspose3d, MaxPool3d, AvgPool3d, AdaptiveAvgPool3d,
AdaptiveMaxPool3d, LPPool3d, MaxUnpool3d, BatchNorm3d, InstanceNorm3d, and the lazy forms
LazyConv3d, LazyConvTranspose3d, LazyBatchNorm3d and LazyInstanceNorm1d/2d/3d.

Conv3d applies a non-zero padding_mode as PyTorch's module does: F.pad with
_reversed_padding_repeated_twice, then the convolution without padding."""
from . import functional as F
from .layers_conv_base import _ConvNd, ntuple
from .layers_conv_more import _ConvTransposeNd
from .layers_lazy import _lazy_conv, _lazy_norm
from .layers_norm import _BatchNorm
from .layers_norm_more import InstanceNorm1d, InstanceNorm2d, _InstanceNorm
from .layers_pool import _AdaptiveAvgPoolNd, _AdaptiveMaxPoolNd, _AvgPoolDivisorNd
from .layers_pool_more import _LPPoolNd, _MaxUnpoolNd
from .layers_conv import MaxPool2d

__all__ = ["Conv3d", "ConvTranspose3d", "MaxPool3d", "AvgPool3d", "AdaptiveAvgPool3d",
           "AdaptiveMaxPool3d", "LPPool3d", "MaxUnpool3d", "BatchNorm3d", "InstanceNorm3d",
           "LazyConv3d", "LazyConvTranspose3d", "LazyBatchNorm3d", "LazyInstanceNorm1d",
           "LazyInstanceNorm2d", "LazyInstanceNorm3d"]


def _triple(x):
    return ntuple(x, 3)


def _reversed_padding_repeated_twice(padding, kernel_size, dilation):
    """PyTorch's F.pad amounts of a convolution module's padding (the last dim first)."""
    if isinstance(padding, str):
        out = [0, 0] * len(kernel_size)
        if padding == "same":
            for d, k, i in zip(dilation, kernel_size, range(len(kernel_size) - 1, -1, -1)):
                total = d * (k - 1)
                out[2 * i], out[2 * i + 1] = total // 2, total - total // 2
        return out
    return tuple(x for x in reversed(padding) for _ in range(2))


class Conv3d(_ConvNd):
    """As torch.nn.Conv3d (padding_mode, groups, dilation, padding='same'/'valid'; PyTorch's
    initialisation from llgrad's generator)."""
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", device=None, dtype=None):
        padding = padding if isinstance(padding, str) else _triple(padding)
        super().__init__(in_channels, out_channels, _triple(kernel_size), _triple(stride),
                         padding, _triple(dilation), False, (0, 0, 0), groups, bias,
                         padding_mode, device, dtype)
        self._reversed_padding_repeated_twice = _reversed_padding_repeated_twice(
            self.padding, self.kernel_size, self.dilation)

    def _conv_forward(self, input, weight, bias):
        if self.padding_mode != "zeros":
            padded = F.pad(input, list(self._reversed_padding_repeated_twice),
                           mode=self.padding_mode)
            return F.conv3d(padded, weight, bias, self.stride, (0, 0, 0), self.dilation,
                            self.groups)
        return F.conv3d(input, weight, bias, self.stride, self.padding, self.dilation,
                        self.groups)

    def forward(self, input):
        return self._conv_forward(input, self.weight, self.bias)


class ConvTranspose3d(_ConvTransposeNd):
    """As torch.nn.ConvTranspose3d (forward takes output_size)."""
    n = 3

    def forward(self, input, output_size=None):
        return F.conv_transpose3d(input, self.weight, self.bias, self.stride, self.padding,
                                  self._output_padding(input, output_size), self.groups,
                                  self.dilation)


class MaxPool3d(MaxPool2d):
    """As torch.nn.MaxPool3d."""
    def forward(self, input):
        return F.max_pool3d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            ceil_mode=self.ceil_mode, return_indices=self.return_indices)


class AvgPool3d(_AvgPoolDivisorNd):
    """As torch.nn.AvgPool3d."""
    _pool = staticmethod(F.avg_pool3d)


class AdaptiveAvgPool3d(_AdaptiveAvgPoolNd):
    """As torch.nn.AdaptiveAvgPool3d."""
    def forward(self, input):
        return F.adaptive_avg_pool3d(input, self.output_size)


class AdaptiveMaxPool3d(_AdaptiveMaxPoolNd):
    """As torch.nn.AdaptiveMaxPool3d."""
    def forward(self, input):
        return F.adaptive_max_pool3d(input, self.output_size, self.return_indices)


class LPPool3d(_LPPoolNd):
    """As torch.nn.LPPool3d: (sum over each window of x^p)^(1/p)."""
    def forward(self, input):
        return F.lp_pool3d(input, float(self.norm_type), self.kernel_size, self.stride,
                           self.ceil_mode)


class MaxUnpool3d(_MaxUnpoolNd):
    """As torch.nn.MaxUnpool3d: MaxPool3d's partial inverse, given its indices."""
    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        self.kernel_size = _triple(kernel_size)
        self.stride = _triple(stride if stride is not None else kernel_size)
        self.padding = _triple(padding)

    def forward(self, input, indices, output_size=None):
        return F.max_unpool3d(input, indices, self.kernel_size, self.stride, self.padding,
                              output_size)


class BatchNorm3d(_BatchNorm):
    """As torch.nn.BatchNorm3d. Compiled (llgrad.compile), the running statistics are
    written back as eager writes them."""
    def _check_input_dim(self, input):
        if input.dim() != 5:
            raise ValueError(f"expected 5D input (got {input.dim()}D input)")


class InstanceNorm3d(_InstanceNorm):
    """As torch.nn.InstanceNorm3d."""
    no_batch_dim = 4

    def _check_input_dim(self, input):
        if input.dim() not in (4, 5):
            raise ValueError(f"expected 4D or 5D input (got {input.dim()}D input)")


LazyConv3d = _lazy_conv(Conv3d, "LazyConv3d")
LazyConvTranspose3d = _lazy_conv(ConvTranspose3d, "LazyConvTranspose3d")
LazyBatchNorm3d = _lazy_norm(BatchNorm3d, "LazyBatchNorm3d")
LazyInstanceNorm1d = _lazy_norm(InstanceNorm1d, "LazyInstanceNorm1d")
LazyInstanceNorm2d = _lazy_norm(InstanceNorm2d, "LazyInstanceNorm2d")
LazyInstanceNorm3d = _lazy_norm(InstanceNorm3d, "LazyInstanceNorm3d")
