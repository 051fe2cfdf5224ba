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


def _conv_grad(conv, of_input, given, size, grad_output, args):
    """The gradient of conv with respect to its input (of_input) or weight of shape size,
    the other operand given."""
    higher = is_grad_enabled() and (given.requires_grad or grad_output.requires_grad)
    with enable_grad():
        z = zeros(tuple(size), dtype=grad_output.dtype, requires_grad=True)
        y = conv(z, given, None, *args) if of_input else conv(given, z, None, *args)
        return _grad(y, z, grad_output, create_graph=higher)[0]


def _functions(conv, d):
    def of_input(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1):
        return _conv_grad(conv, True, weight, input_size, grad_output,
                          (stride, padding, dilation, groups))

    def of_weight(input, weight_size, grad_output, stride=1, padding=0, dilation=1, groups=1):
        return _conv_grad(conv, False, input, weight_size, grad_output,
                          (stride, padding, dilation, groups))
    for fn, what, size in ((of_input, "input", "input_size"),
                           (of_weight, "weight", "weight_size")):
        fn.__name__ = fn.__qualname__ = f"conv{d}d_{what}"
        fn.__doc__ = f"The gradient of conv{d}d with respect to a{'n' * (what == 'input')} " \
                     f"{what} of {size}."
    return of_input, of_weight


conv1d_input, conv1d_weight = _functions(conv1d, 1)
conv2d_input, conv2d_weight = _functions(conv2d, 2)
conv3d_input, conv3d_weight = _functions(conv3d, 3)
