"""llgrad.nn.grad, torch.nn.grad: the gradients of a convolution with respect to its input
and its weight, given the gradient of its output (what a custom autograd.Function's backward
calls, as PyTorch's "fuse convolution and batch norm" tutorial does).

Each is the vector-Jacobian product of the functional convolution itself (linear in the
input and in the weight, so taken at zeros), through the autograd engine: the same backward
kernels as the convolution's own gradient, and, where grad mode is on and the weight or the
gradient requires grad, a result that is differentiable again, as PyTorch's."""
from ..autograd import grad as _grad
from ..runtime.creation import zeros
from ..runtime.grad_mode import enable_grad, is_grad_enabled
from .functional import conv1d, conv2d, conv3d

__all__ = ["conv1d_input", "conv1d_weight", "conv2d_input", "conv2d_weight",
           "conv3d_input", "conv3d_weight"]


def _input_grad(conv, input_size, weight, grad_output, stride, padding, dilation, groups):
    higher = is_grad_enabled() and (weight.requires_grad or grad_output.requires_grad)
    with enable_grad():
        x = zeros(tuple(input_size), dtype=grad_output.dtype, requires_grad=True)
        y = conv(x, weight, None, stride, padding, dilation, groups)
        return _grad(y, x, grad_output, create_graph=higher)[0]


def _weight_grad(conv, input, weight_size, grad_output, stride, padding, dilation, groups):
    higher = is_grad_enabled() and (input.requires_grad or grad_output.requires_grad)
    with enable_grad():
        w = zeros(tuple(weight_size), dtype=grad_output.dtype, requires_grad=True)
        y = conv(input, w, None, stride, padding, dilation, groups)
        return _grad(y, w, grad_output, create_graph=higher)[0]


def conv1d_input(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1):
    """The gradient of conv1d with respect to an input of input_size."""
    return _input_grad(conv1d, input_size, weight, grad_output, stride, padding, dilation,
                       groups)


def conv1d_weight(input, weight_size, grad_output, stride=1, padding=0, dilation=1, groups=1):
    """The gradient of conv1d with respect to a weight of weight_size."""
    return _weight_grad(conv1d, input, weight_size, grad_output, stride, padding, dilation,
                        groups)


def conv2d_input(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1):
    """The gradient of conv2d with respect to an input of input_size."""
    return _input_grad(conv2d, input_size, weight, grad_output, stride, padding, dilation,
                       groups)


def conv2d_weight(input, weight_size, grad_output, stride=1, padding=0, dilation=1, groups=1):
    """The gradient of conv2d with respect to a weight of weight_size."""
    return _weight_grad(conv2d, input, weight_size, grad_output, stride, padding, dilation,
                        groups)


def conv3d_input(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1):
    """The gradient of conv3d with respect to an input of input_size."""
    return _input_grad(conv3d, input_size, weight, grad_output, stride, padding, dilation,
                       groups)


def conv3d_weight(input, weight_size, grad_output, stride=1, padding=0, dilation=1, groups=1):
    """The gradient of conv3d with respect to a weight of weight_size."""
    return _weight_grad(conv3d, input, weight_size, grad_output, stride, padding, dilation,
                        groups)
