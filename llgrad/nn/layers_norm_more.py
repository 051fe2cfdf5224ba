"""GroupNorm, InstanceNorm1d/2d, RMSNorm and LocalResponseNorm (PyTorch's parameters,
buffers, checks and extra_repr) over F.group_norm / F.instance_norm / F.rms_norm /
F.local_response_norm. InstanceNorm shares BatchNorm's parameters and buffers (PyTorch's
_NormBase), so its state_dict keys are PyTorch's."""
import numbers
import sys
import warnings

from ..runtime.creation import empty
from . import functional as F
from . import init
from .factory import factory_kwargs
from .layers_norm import _BatchNorm, affine_parameters, reset_affine
from .module import Module, Parameter

__all__ = ["GroupNorm", "InstanceNorm1d", "InstanceNorm2d", "RMSNorm", "LocalResponseNorm",
           "SyncBatchNorm"]


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

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        # a dict without version metadata (a plain dict, or a checkpoint from before
        # PyTorch 0.4) may hold running stats that a module without them cannot take:
        # PyTorch reports them as an error whatever `strict` says, and drops them
        if local_metadata.get("version", None) is None and not self.track_running_stats:
            keys = [prefix + n for n in ("running_mean", "running_var")
                    if prefix + n in state_dict]
            if keys:
                klass = type(self).__name__
                names = " and ".join('"' + k + '"' for k in keys)
                error_msgs.append(
                    f"Unexpected running stats buffer(s) {names} "
                    f"for {klass} with track_running_stats=False. If state_dict is a "
                    f"checkpoint saved before 0.4.0, this may be expected because {klass} "
                    "does not track running stats by default since 0.4.0. Please remove "
                    "these keys from state_dict. If the running stats are actually needed, "
                    f"instead set track_running_stats=True in {klass} to enable them. See "
                    f"the documentation of {klass} for details.")
                for k in keys:
                    state_dict.pop(k)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict,
                                      missing_keys, unexpected_keys, error_msgs)

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


class SyncBatchNorm(_BatchNorm):
    """As torch.nn.SyncBatchNorm in one process (PyTorch's CPU path without a process group
    of several ranks): BatchNorm over inputs of 2 or more dims. Training across several
    processes raises, as llgrad does not synchronise the statistics."""
    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, process_group=None, device=None, dtype=None, *,
                 bias=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device,
                         dtype, bias=bias)
        self.process_group = process_group

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError(f"expected at least 2D input (got {input.dim()}D input)")

    def forward(self, input):
        dist = sys.modules.get("llgrad.distributed")    # (loaded if a program uses it)
        if self.training and dist is not None and dist.is_initialized() and \
                dist.get_world_size(self.process_group) > 1:
            raise NotImplementedError("llgrad: SyncBatchNorm does not synchronise the batch "
                                      "statistics across processes")
        return super().forward(input)

    @classmethod
    def convert_sync_batchnorm(cls, module, process_group=None):
        """module with each BatchNorm (not InstanceNorm) replaced by a SyncBatchNorm sharing
        its parameters and buffers, as torch.nn.SyncBatchNorm.convert_sync_batchnorm."""
        root = cls._convert_one(module, process_group)
        stack = [root]
        while stack:
            m = stack.pop()
            seen = set()
            for name, child in list(m._modules.items()):
                if child is None or id(child) in seen:
                    continue
                seen.add(id(child))
                new = cls._convert_one(child, process_group)
                m.add_module(name, new)
                stack.append(new)
        return root

    @classmethod
    def _convert_one(cls, module, process_group):
        if not isinstance(module, _BatchNorm) or isinstance(module, _InstanceNorm):
            return module
        out = cls(module.num_features, module.eps, module.momentum, module.affine,
                  module.track_running_stats, process_group, bias=module.bias is not None)
        if module.affine:
            out.weight, out.bias = module.weight, module.bias
        out.running_mean, out.running_var = module.running_mean, module.running_var
        out.num_batches_tracked = module.num_batches_tracked
        out.training = module.training
        return out
