"""Conv1d, ConvTranspose1d and ConvTranspose2d (PyTorch's parameters, checks, output_size
argument and extra_repr) over F.conv1d / F.conv_transpose1d / F.conv_transpose2d."""
from . import functional as F
from .layers_conv_base import _ConvNd, ntuple

__all__ = ["Conv1d", "ConvTranspose1d", "ConvTranspose2d"]


class Conv1d(_ConvNd):
    """As torch.nn.Conv1d."""
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", device=None, dtype=None):
        padding = padding if isinstance(padding, str) else ntuple(padding, 1)
        super().__init__(in_channels, out_channels, ntuple(kernel_size, 1), ntuple(stride, 1),
                         padding, ntuple(dilation, 1), False, (0,), groups, bias, padding_mode,
                         device, dtype)

    def forward(self, input):
        self._check_padding_rank(input)
        return F.conv1d(input, self.weight, self.bias, self.stride, self.padding, self.dilation,
                        self.groups, self.padding_mode)


class _ConvTransposeNd(_ConvNd):
    n = 2

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 output_padding=0, groups=1, bias=True, dilation=1, padding_mode="zeros",
                 device=None, dtype=None):
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for '
                             f'{self.__class__.__name__}')
        n = self.n
        super().__init__(in_channels, out_channels, ntuple(kernel_size, n), ntuple(stride, n),
                         ntuple(padding, n), ntuple(dilation, n), True,
                         ntuple(output_padding, n), groups, bias, padding_mode, device, dtype)

    def _output_padding(self, input, output_size):
        if output_size is None:
            return self.output_padding
        n = self.n
        lead = 2 if input.dim() == n + 2 else 1
        if len(output_size) == lead + n:        # (kept as given: the message shows it so)
            output_size = output_size[lead:]
        if len(output_size) != n:
            raise ValueError(f"ConvTranspose{n}D: for {input.dim()}D input, output_size must "
                             f"have {n} or {lead + n} elements (got {len(output_size)})")
        mins = [(input.shape[d + lead] - 1) * self.stride[d] - 2 * self.padding[d]
                + self.dilation[d] * (self.kernel_size[d] - 1) + 1 for d in range(n)]
        maxs = [m + s - 1 for m, s in zip(mins, self.stride)]
        for size, lo, hi in zip(output_size, mins, maxs):
            if size < lo or size > hi:
                raise ValueError(f"requested an output size of {output_size}, but valid sizes "
                                 f"range from {mins} to {maxs} (for an input of "
                                 f"{input.shape[2:]})")      # (PyTorch's words, batch or not)
        return tuple(o - m for o, m in zip(output_size, mins))

    def forward(self, input, output_size=None):
        fn = F.conv_transpose1d if self.n == 1 else F.conv_transpose2d
        return fn(input, self.weight, self.bias, self.stride, self.padding,
                  self._output_padding(input, output_size), self.groups, self.dilation)


class ConvTranspose1d(_ConvTransposeNd):
    """As torch.nn.ConvTranspose1d (forward takes output_size)."""
    n = 1


class ConvTranspose2d(_ConvTransposeNd):
    """As torch.nn.ConvTranspose2d (forward takes output_size)."""
    n = 2
