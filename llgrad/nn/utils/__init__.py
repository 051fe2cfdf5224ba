"""llgrad.nn.utils: gradient clipping and parameter/vector conversion (torch.nn.utils)."""
from .clip_grad import (clip_grad_norm, clip_grad_norm_, clip_grad_value_,  # noqa: F401
                        clip_grads_with_norm_, get_total_norm)
from . import parametrizations, parametrize, prune, rnn, stateless  # noqa: F401
from .fusion import (convert_conv2d_weight_memory_format,  # noqa: F401
                     convert_conv3d_weight_memory_format, fuse_conv_bn_eval, fuse_conv_bn_weights,
                     fuse_linear_bn_eval, fuse_linear_bn_weights, skip_init)
from .spectral_norm import remove_spectral_norm, spectral_norm  # noqa: F401
from .weight_norm import remove_weight_norm, weight_norm  # noqa: F401
from .convert_parameters import parameters_to_vector, vector_to_parameters  # noqa: F401

__all__ = ["clip_grad_norm", "clip_grad_norm_", "clip_grad_value_", "clip_grads_with_norm_",
           "get_total_norm", "parameters_to_vector", "vector_to_parameters", "weight_norm",
           "remove_weight_norm", "fuse_conv_bn_eval", "fuse_conv_bn_weights", "fuse_linear_bn_eval",
           "fuse_linear_bn_weights", "skip_init", "convert_conv2d_weight_memory_format",
           "convert_conv3d_weight_memory_format", "spectral_norm", "remove_spectral_norm"]
