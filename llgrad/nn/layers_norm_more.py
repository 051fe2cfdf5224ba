"""GroupNorm, InstanceNorm1d/2d, RMSNorm and LocalResponseNorm (PyTorch's parameters,
buffers, checks and extra_repr) over F.group_norm / F.instance_norm / F.rms_norm /
F.local_response_norm. InstanceNorm shares BatchNorm's parameters and buffers (PyTorch's
_NormBase), so its state_dict keys are PyTorch's."""
import numbers
import warnings

from ..runtime.creation import empty
from . import functional as F
from . import init
from .factory import factory_kwargs
from .layers_norm import _BatchNorm, affine_parameters, reset_affine
from .module import Module, Parameter

__all__ = ["GroupNorm", "InstanceNorm1d", "InstanceNorm2d", "RMSNorm", "LocalResponseNorm"]


class GroupNorm(Module):
    """As torch.nn.GroupNorm."""
    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None,
                 dtype=None, *, bias=True):
        super().__init__()
        kw = factory_kwargs(device, dtype)
        if num_channels % num_groups != 0:
            raise ValueError(f"num_channels ({num_channels}) must be divisible by num_groups "
                             f"({num_groups})")
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        affine_parameters(self, num_channels, affine, bias, kw)
        self.reset_parameters()

    def reset_parameters(self):
        """weight to 1, bias to 0."""
        reset_affine(self)

    def forward(self, input):
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return ("{num_groups}, {num_channels}, eps={eps}, affine={affine}, "
                "bias={use_bias}".format(**self.__dict__, use_bias=self.bias is not None))


class _InstanceNorm(_BatchNorm):
    no_batch_dim = 2

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=False,
                 track_running_stats=False, device=None, dtype=None, *, bias=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device,
                         dtype, bias=bias)

    def _instance_norm(self, input):
        return F.instance_norm(input, self.running_mean, self.running_var, self.weight,
                               self.bias, self.training or not self.track_running_stats,
                               self.momentum if self.momentum is not None else 0.0, self.eps)

    def forward(self, input):
        self._check_input_dim(input)
        feature_dim = input.dim() - self.no_batch_dim
        if input.shape[feature_dim] != self.num_features:
            if self.affine:
                raise ValueError(f"expected input's size at dim={feature_dim} to match "
                                 f"num_features ({self.num_features}), but got: "
                                 f"{input.shape[feature_dim]}.")
            warnings.warn(f"input's size at dim={feature_dim} does not match num_features. You "
                          "can silence this warning by not passing in num_features, which is "
                          "not used because affine=False", stacklevel=2)
        if input.dim() == self.no_batch_dim:
            return self._instance_norm(input.unsqueeze(0)).squeeze(0)
        return self._instance_norm(input)


class InstanceNorm1d(_InstanceNorm):
    """As torch.nn.InstanceNorm1d."""
    no_batch_dim = 2

    def _check_input_dim(self, input):
        if input.dim() not in (2, 3):
            raise ValueError(f"expected 2D or 3D input (got {input.dim()}D input)")


class InstanceNorm2d(_InstanceNorm):
    """As torch.nn.InstanceNorm2d."""
    no_batch_dim = 3

    def _check_input_dim(self, input):
        if input.dim() not in (3, 4):
            raise ValueError(f"expected 3D or 4D input (got {input.dim()}D input)")


class RMSNorm(Module):
    """As torch.nn.RMSNorm."""
    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None,
                 dtype=None):
        super().__init__()
        if isinstance(normalized_shape, numbers.Integral):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if self.elementwise_affine:
            self.weight = Parameter(empty(self.normalized_shape,
                                          **factory_kwargs(device, dtype)))
        else:
            self.register_parameter("weight", None)
        self.reset_parameters()

    def reset_parameters(self):
        """weight to 1."""
        if self.elementwise_affine:
            init.ones_(self.weight)

    def forward(self, x):
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return ("{normalized_shape}, eps={eps}, "
                "elementwise_affine={elementwise_affine}".format(**self.__dict__))


class LocalResponseNorm(Module):
    """As torch.nn.LocalResponseNorm: each element divided by (k + alpha * the mean of the
    squares over `size` neighbouring channels) ** beta."""
    def __init__(self, size, alpha=1e-4, beta=0.75, k=1.0):
        super().__init__()
        self.size = size
        self.alpha = alpha
        self.beta = beta
        self.k = k

    def forward(self, input):
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self):
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"
