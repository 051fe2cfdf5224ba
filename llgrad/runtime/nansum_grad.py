"""nansum's nan-to-zero step with PyTorch's gradient: nansum_backward multiplies the gradient
by ~isnan(input), so an infinite or nan gradient at a nan input (an all-nan slice of nanmean:
1 / 0 elements) gives nan there, where masked_fill's rule would give 0. nan_to_num's likewise
(grad * isfinite(input))."""
from . import grad_mode
from .autograd_function import Function


class _NanToZero(Function):
    """input with nan as 0; backward: grad * ~isnan(input)."""
    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        return x.masked_fill(x.isnan(), 0)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.keep = ~inputs[0].isnan()

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.keep


def nan_to_zero(x):
    """x with nan as 0 (floating x), differentiated as PyTorch's nansum."""
    if x.requires_grad and grad_mode.is_grad_enabled():
        return _NanToZero.apply(x)
    return x.masked_fill(x.isnan(), 0)


class _NanToNum(Function):
    """fill(x) (x's nan and infinities replaced); backward: grad * isfinite(x), PyTorch's rule
    (a nan or infinite gradient at a non-finite input gives nan, where where's rule gives 0)."""
    generate_vmap_rule = True

    @staticmethod
    def forward(x, fill):
        return fill(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.keep = inputs[0].isfinite()

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.keep, None

    @staticmethod
    def jvp(ctx, tangent, _):
        return tangent * ctx.keep


_NanToNum._backward_cls.__name__ = "NanToNumBackward0"     # (PyTorch's node name)


def nan_to_num_grad(x, fill):
    """fill(x), differentiated as PyTorch's nan_to_num."""
    if x.requires_grad and grad_mode.is_grad_enabled():
        return _NanToNum.apply(x, fill)
    return fill(x)
