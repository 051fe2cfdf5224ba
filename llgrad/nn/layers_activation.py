"""The activation modules beyond ReLU/GELU/SiLU/Tanh/Sigmoid/Softmax (PyTorch's constructor
arguments, checks and extra_repr) over llgrad.nn.functional."""
import warnings

from ..runtime.creation import empty
from . import functional as F
from . import functional_noise as FN
from . import init as _init
from .factory import factory_kwargs
from .module import Module, Parameter

__all__ = ["ELU", "CELU", "SELU", "Hardtanh", "ReLU6", "LogSigmoid", "GLU", "Mish",
           "Hardswish", "Hardsigmoid", "Softsign", "Tanhshrink", "Threshold", "LeakyReLU",
           "Softplus", "Softmin", "Hardshrink", "Softshrink", "PReLU", "RReLU"]


def _inplace(inplace, lead=", "):
    return f"{lead}inplace=True" if inplace else ""


class ELU(Module):
    """As torch.nn.ELU."""
    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def forward(self, input):
        return F.elu(input, self.alpha, self.inplace)

    def extra_repr(self):
        return f"alpha={self.alpha}{_inplace(self.inplace)}"


class CELU(ELU):
    """As torch.nn.CELU."""
    def forward(self, input):
        return F.celu(input, self.alpha, self.inplace)


class _InplaceOnly(Module):
    """A module whose only argument is inplace."""

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace


class SELU(_InplaceOnly):
    """As torch.nn.SELU."""
    def forward(self, input):
        return F.selu(input, self.inplace)

    def extra_repr(self):
        return _inplace(self.inplace, "")


class Mish(SELU):
    """As torch.nn.Mish."""
    def forward(self, input):
        return F.mish(input, inplace=self.inplace)


class Hardswish(_InplaceOnly):
    """As torch.nn.Hardswish."""
    def forward(self, input):
        return F.hardswish(input, self.inplace)


class Hardsigmoid(_InplaceOnly):
    """As torch.nn.Hardsigmoid."""
    def forward(self, input):
        return F.hardsigmoid(input, self.inplace)


class Hardtanh(Module):
    """As torch.nn.Hardtanh."""
    def __init__(self, min_val=-1.0, max_val=1.0, inplace=False, min_value=None,
                 max_value=None):
        super().__init__()
        if min_value is not None:
            warnings.warn("keyword argument `min_value` is deprecated and renamed to `min_val`",
                          FutureWarning, stacklevel=2)
            min_val = min_value
        if max_value is not None:
            warnings.warn("keyword argument `max_value` is deprecated and renamed to `max_val`",
                          FutureWarning, stacklevel=2)
            max_val = max_value
        self.min_val = min_val
        self.max_val = max_val
        self.inplace = inplace
        if self.max_val <= self.min_val:
            raise AssertionError(f"max_val ({self.max_val}) must be greater than min_val "
                                 f"({self.min_val})")

    def forward(self, input):
        return F.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self):
        return f"min_val={self.min_val}, max_val={self.max_val}{_inplace(self.inplace)}"


class ReLU6(Hardtanh):
    """As torch.nn.ReLU6."""
    def __init__(self, inplace=False):
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self):
        return _inplace(self.inplace, "")


class LogSigmoid(Module):
    """As torch.nn.LogSigmoid."""
    def forward(self, input):
        return F.logsigmoid(input)


class Softsign(Module):
    """As torch.nn.Softsign."""
    def forward(self, input):
        return F.softsign(input)


class Tanhshrink(Module):
    """As torch.nn.Tanhshrink."""
    def forward(self, input):
        return F.tanhshrink(input)


class GLU(Module):
    """As torch.nn.GLU."""
    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.glu(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class Threshold(Module):
    """As torch.nn.Threshold."""
    def __init__(self, threshold, value, inplace=False):
        super().__init__()
        self.threshold = threshold
        self.value = value
        self.inplace = inplace

    def forward(self, input):
        return F.threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self):
        return f"threshold={self.threshold}, value={self.value}{_inplace(self.inplace)}"


class LeakyReLU(Module):
    """As torch.nn.LeakyReLU."""
    def __init__(self, negative_slope=0.01, inplace=False):
        super().__init__()
        self.negative_slope = negative_slope
        self.inplace = inplace

    def forward(self, input):
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}{_inplace(self.inplace)}"


class Softplus(Module):
    """As torch.nn.Softplus."""
    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, input):
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self):
        return f"beta={self.beta}, threshold={self.threshold}"


class Softmin(Module):
    """As torch.nn.Softmin."""
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.softmin(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class Hardshrink(Module):
    """As torch.nn.Hardshrink."""
    def __init__(self, lambd=0.5):
        super().__init__()
        self.lambd = lambd

    def forward(self, input):
        return F.hardshrink(input, self.lambd)

    def extra_repr(self):
        return f"{self.lambd}"


class Softshrink(Hardshrink):
    """As torch.nn.Softshrink."""
    def forward(self, input):
        return F.softshrink(input, self.lambd)


class PReLU(Module):
    """As torch.nn.PReLU (a learnt slope, one or one per channel)."""
    def __init__(self, num_parameters=1, init=0.25, device=None, dtype=None):
        super().__init__()
        self.num_parameters = num_parameters
        self.init = init
        self.weight = Parameter(empty(num_parameters, **factory_kwargs(device, dtype)))
        self.reset_parameters()

    def reset_parameters(self):
        """Fill the slope with init, as torch.nn.PReLU.reset_parameters."""
        _init.constant_(self.weight, self.init)

    def forward(self, input):
        return F.prelu(input, self.weight)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"


class RReLU(Module):
    """As torch.nn.RReLU: in training each non-positive element is multiplied by a slope drawn
    uniformly from [lower, upper] (llgrad's generator); in evaluation by (lower + upper) / 2."""
    def __init__(self, lower=1.0 / 8, upper=1.0 / 3, inplace=False):
        super().__init__()
        self.lower = lower
        self.upper = upper
        self.inplace = inplace

    def forward(self, input):
        return FN.rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self):
        return f"lower={self.lower}, upper={self.upper}{_inplace(self.inplace)}"
