"""The functions that draw from the global generator as they compute: gumbel_softmax and the
randomised leaky ReLU (rrelu, rrelu_), as torch.nn.functional's.

Both draw with llgrad's random ops (exponential_; rrelu_noise, whose number of draws
depends on the values), so a traced call records a random op that compiled calls replay
from the generator's state, as eager does; a seed gives PyTorch's numbers. gumbel_softmax
is PyTorch's own composition (its straight-through estimator for hard=True included).
rrelu in training multiplies each non-positive element by a slope drawn uniformly from
[lower, upper] (ATen's _rrelu_with_noise_train: the gradient is that slope, 1 elsewhere);
in evaluation it is leaky_relu with the mean slope (lower + upper) / 2."""
import warnings

from ..runtime.creation import empty_like, zeros_like
from ..runtime.methods_random_more import rrelu_noise
from ..runtime.node_names import rename
from .functional_loss import _NAMES
from ..runtime.vmap_fallback import values_read

__all__ = ["gumbel_softmax", "rrelu", "rrelu_", "rrelu_out_of_place"]


def gumbel_softmax(logits, tau=1, hard=False, eps=1e-10, dim=-1):
    """As torch.nn.functional.gumbel_softmax: softmax((logits + g) / tau) with g ~ Gumbel(0, 1)
    drawn from the global generator; hard=True returns the one-hot of its argmax in the
    forward and the soft sample's gradient in the backward (straight through)."""
    if eps != 1e-10:
        warnings.warn("`eps` parameter is deprecated and has no effect.", stacklevel=2)
    gumbels = -empty_like(logits).exponential_().log()          # ~Gumbel(0, 1)
    gumbels = (logits + gumbels) / tau                          # ~Gumbel(logits, tau)
    y_soft = gumbels.softmax(dim)
    if not hard:
        return y_soft
    index = y_soft.max(dim, keepdim=True)[1]
    y_hard = zeros_like(logits).scatter_(dim, index, 1.0)
    return y_hard - y_soft.detach() + y_soft


def _slope(input, lower, upper, training, generator=None):
    """The per-element multiplier of training-mode rrelu, or None in evaluation (checked)."""
    if lower > upper:
        raise RuntimeError("Lower bound should be less than or equal to the upper bound")
    # (ATen's CPU draw loop has no Half kernel; its leaky_relu has)
    if not input.is_floating_point() or training and input.dtype.name == "float16":
        kernel = "rrelu_with_noise_out_cpu" if training else "leaky_relu_cpu"
        raise NotImplementedError(f'"{kernel}" not implemented for '
                                  f"'{_NAMES.get(input.dtype.name, input.dtype.name)}'")
    if not training:
        return None
    return rrelu_noise(input.detach(), lower, upper, generator)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """As torch.nn.functional.rrelu: leaky ReLU with a random slope in [lower, upper] for each
    element in training, the mean slope in evaluation."""
    if inplace:
        return rrelu_(input, lower, upper, training)
    return rrelu_out_of_place(input, lower, upper, training)


@values_read
def rrelu_out_of_place(input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):
    """rrelu, the slopes drawn from generator when one is given (torch.rrelu)."""
    slope = _slope(input, lower, upper, training, generator)
    # (PyTorch's result is row-major whatever input's layout)
    if slope is None:
        return rename(input.contiguous().leaky_relu((lower + upper) / 2),
                      "RreluWithNoiseBackward0", (input,))
    return rename(input.contiguous() * slope, "RreluWithNoiseBackward0", (input,))


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):
    """As torch.nn.functional.rrelu_ (torch.rrelu_): rrelu in place (the slopes drawn from
    generator when one is given)."""
    slope = _slope(input, lower, upper, training, generator)
    if slope is None:
        return rename(input._iop("leaky_relu_", negative_slope=(lower + upper) / 2),
                      "RreluWithNoiseBackward1")
    return rename(input.mul_(slope), "RreluWithNoiseBackward1")
