"""torch.nn.utils' model-surgery helpers: fuse_conv_bn_eval / fuse_conv_bn_weights and
fuse_linear_bn_eval / fuse_linear_bn_weights (an eval-mode BatchNorm folded into the
preceding layer's weight and bias, PyTorch's formulas), skip_init, and the memory-format
conversions (llgrad tensors have one layout for a module's weights: the module is returned
as it is)."""
import copy
import inspect

from ...runtime.creation import ones_like, zeros_like
from ..module import Module
from ..parameter import Parameter

__all__ = ["fuse_conv_bn_eval", "fuse_conv_bn_weights", "fuse_linear_bn_eval",
           "fuse_linear_bn_weights", "skip_init", "convert_conv2d_weight_memory_format",
           "convert_conv3d_weight_memory_format"]


def fuse_conv_bn_eval(conv, bn, transpose=False):
    """A copy of conv whose output is bn(conv(x)) in eval mode."""
    if conv.training or bn.training:
        raise AssertionError("Fusion only for eval!")
    fused = copy.deepcopy(conv)
    if bn.running_mean is None or bn.running_var is None:
        raise AssertionError("bn.running_mean and bn.running_var must not be None")
    fused.weight, fused.bias = fuse_conv_bn_weights(fused.weight, fused.bias, bn.running_mean,
                                                    bn.running_var, bn.eps, bn.weight, bn.bias,
                                                    transpose)
    return fused


def fuse_conv_bn_weights(conv_w, conv_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b, transpose=False):
    """(weight, bias) Parameters of the convolution with the BatchNorm folded in."""
    w_dtype = conv_w.dtype
    b_dtype = conv_b.dtype if conv_b is not None else w_dtype
    conv_b = zeros_like(bn_rm) if conv_b is None else conv_b
    bn_w = ones_like(bn_rm) if bn_w is None else bn_w
    bn_b = zeros_like(bn_rm) if bn_b is None else bn_b
    rsqrt = (bn_rv + bn_eps).rsqrt()
    shape = ([1, -1] if transpose else [-1, 1]) + [1] * (conv_w.dim() - 2)
    fused_w = (conv_w * (bn_w * rsqrt).reshape(shape)).to(dtype=w_dtype)
    fused_b = ((conv_b - bn_rm) * rsqrt * bn_w + bn_b).to(dtype=b_dtype)
    return (Parameter(fused_w.detach(), conv_w.requires_grad),
            Parameter(fused_b.detach(), conv_b.requires_grad))


def fuse_linear_bn_eval(linear, bn):
    """A copy of linear whose output is bn(linear(x)) in eval mode."""
    if linear.training or bn.training:
        raise AssertionError("Fusion only for eval!")
    fused = copy.deepcopy(linear)
    if linear.out_features != bn.num_features and bn.num_features != 1:
        raise AssertionError("To fuse, linear.out_features == bn.num_features or "
                             f"bn.num_features == 1, got linear.out_features="
                             f"{linear.out_features} and bn.num_features={bn.num_features}")
    if bn.running_mean is None or bn.running_var is None:
        raise AssertionError("bn.running_mean and bn.running_var must not be None")
    fused.weight, fused.bias = fuse_linear_bn_weights(fused.weight, fused.bias, bn.running_mean,
                                                      bn.running_var, bn.eps, bn.weight, bn.bias)
    return fused


def fuse_linear_bn_weights(linear_w, linear_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b):
    """(weight, bias) Parameters of the linear layer with the BatchNorm folded in."""
    w_dtype = linear_w.dtype
    b_dtype = linear_b.dtype if linear_b is not None else w_dtype
    linear_b = zeros_like(bn_rm) if linear_b is None else linear_b
    scale = bn_w * (bn_rv + bn_eps).rsqrt()
    fused_w = linear_w * scale.unsqueeze(-1).to(dtype=w_dtype)
    fused_b = ((linear_b - bn_rm) * scale + bn_b).to(dtype=b_dtype)
    return (Parameter(fused_w.detach(), linear_w.requires_grad),
            Parameter(fused_b.detach(), linear_b.requires_grad))


def skip_init(module_cls, *args, **kwargs):
    """module_cls(*args, **kwargs) whose parameters' values are unspecified (PyTorch skips
    their initialisation; here they hold whatever the constructor made)."""
    if not (isinstance(module_cls, type) and issubclass(module_cls, Module)):
        raise RuntimeError(f"Expected a Module; got {module_cls}")
    if "device" not in inspect.signature(module_cls).parameters:
        raise RuntimeError("Module must support a 'device' arg to skip initialization")
    return module_cls(*args, **kwargs)


def convert_conv2d_weight_memory_format(module, memory_format):
    """Returns module (weights keep llgrad's one layout; the values are unchanged)."""
    return module


def convert_conv3d_weight_memory_format(module, memory_format):
    """Returns module (weights keep llgrad's one layout; the values are unchanged)."""
    return module
