"""CrossMapLRN2d, PyTorch's legacy cross-channel response normalisation, as its
autograd.Function computes it: the forward's running window over the channels (which, as
PyTorch's loop, never drops channel 0 once it passes it) and its own backward, whose window
is the symmetric one of `size` channels (not the forward's exact derivative)."""
import numpy as np

from ..runtime.autograd_function import Function
from ..runtime.creation import tensor
from .module import Module

__all__ = ["CrossMapLRN2d"]


def _forward_window(c, size):
    """(C, C) 0/1: row c marks the channels PyTorch's forward sums for channel c."""
    pre_pad = int((size - 1) / 2 + 1)
    m = np.zeros((c, c))
    m[0, :min(pre_pad, c)] = 1
    for i in range(1, c):
        m[i] = m[i - 1]
        if i < c - pre_pad + 1:
            m[i, i + pre_pad - 1] += 1
        if i > pre_pad:
            m[i, i - pre_pad] -= 1
    return m


def _backward_window(c, size):
    """(C, C) 0/1: row c marks the channels PyTorch's backward sums for channel c."""
    inv = int(size - (size - 1) / 2)
    j = np.arange(c)
    return ((j[None, :] >= j[:, None] - inv) & (j[None, :] <= j[:, None] + size - 1 - inv)) \
        .astype(np.float64)


def _mix(t, window):
    """sum_j window[c, j] * t[:, j] for t (N, C, H, W)."""
    w = tensor(window.T.astype(t.dtype.name))
    return t.permute(0, 2, 3, 1).matmul(w).permute(0, 3, 1, 2)


class _CrossMapLRN2d(Function):
    @staticmethod
    def forward(ctx, input, size, alpha=1e-4, beta=0.75, k=1):
        if input.dim() != 4:
            raise ValueError(f"CrossMapLRN2d: Expected input to be 4D, got {input.dim()}D "
                             "instead.")
        ctx.size, ctx.alpha, ctx.beta = size, alpha, beta
        scale = _mix(input * input, _forward_window(input.shape[1], size)) \
            .mul(alpha / size).add(k)
        output = scale.pow(-beta).mul(input)
        ctx.scale = scale
        ctx.save_for_backward(input, output)
        return output

    @staticmethod
    def backward(ctx, grad_output):
        input, output = ctx.saved_tensors
        ratio = _mix(grad_output * output / ctx.scale,
                     _backward_window(input.shape[1], ctx.size))
        grad = ctx.scale.pow(-ctx.beta) * grad_output \
            - (2 * ctx.alpha * ctx.beta / ctx.size) * input * ratio
        return grad, None, None, None, None


_CrossMapLRN2d._backward_cls.__name__ = "CrossMapLRN2dBackward"     # (PyTorch's grad_fn name)


class CrossMapLRN2d(Module):
    """As torch.nn.CrossMapLRN2d."""
    def __init__(self, size, alpha=1e-4, beta=0.75, k=1):
        super().__init__()
        self.size = size
        self.alpha = alpha
        self.beta = beta
        self.k = k

    def forward(self, input):
        return _CrossMapLRN2d.apply(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self):
        return "{size}, alpha={alpha}, beta={beta}, k={k}".format(**self.__dict__)
