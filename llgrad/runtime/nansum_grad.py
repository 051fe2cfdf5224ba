"""nansum's nan-to-zero step with PyTorch's gradient: nansum_backward multiplies the gradient
by ~isnan(input), so an infinite or nan gradient at a nan input (an all-nan slice of nanmean:
1 / 0 elements) gives nan there, where masked_fill's rule would give 0."""
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
