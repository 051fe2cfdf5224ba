"""F.max_pool1d (and the *_with_indices names), the channel-wise dropouts (dropout1d/2d/3d,
feature_alpha_dropout) and alpha_dropout, and unfold / fold (im2col and its adjoint), as
torch.nn.functional's: PyTorch's checks, messages and index conventions. Masks are drawn
with rand from llgrad's generator (a traced dropout is a random op compiled calls replay)."""
import math
import warnings

from ..runtime import grad_mode
from ..runtime.creation import rand, zeros
from ..runtime.dispatch import scalar_type_name
from ..runtime.dtypes import bool_, float64 as llgrad_float64
from ..runtime.functions import stack
from ..runtime.node_names import rename
from .functional_activation import floating_only
from .functional_conv import _pair, max_pool2d
from .functional_pad import pad
from .dropout_noise import uniform_noise_like
from ..runtime.vmap_fallback import meta_on_mismatch

__all__ = ["max_pool1d", "max_pool1d_with_indices", "max_pool2d_with_indices", "dropout1d",
           "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout", "unfold", "fold"]


def _one(v, name):
    v = tuple(v) if isinstance(v, (tuple, list)) else (v,)
    if len(v) != 1:
        raise RuntimeError(f"max_pool1d() {name} must be an int or a 1-tuple")
    return int(v[0])


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """As torch.nn.functional.max_pool1d: indices are positions along the length."""
    if input.dim() not in (2, 3) and return_indices:    # (ATen's max_pool1d_with_indices)
        raise RuntimeError(f"Expected 2 to 3 dimensions, but got {input.dim()}-dimensional "
                           "tensor for argument #1 'self' (while checking arguments for "
                           "max_pool1d)")
    if input.dim() not in (2, 3) or (not return_indices and 0 in input.shape[-2:]):
        raise RuntimeError("max_pool1d: Expected 2D or 3D (batch mode) tensor with optional 0 "
                           f"dim batch size for input, but got:{list(input.shape)}")
    k = _one(kernel_size, "kernel_size")
    s = k if stride is None or (isinstance(stride, (tuple, list)) and not stride) \
        else _one(stride, "stride")
    p, d = _one(padding, "padding"), _one(dilation, "dilation")
    if k <= 0:
        raise RuntimeError(f"max_pool1d() kernel_size must be greater than zero, but got {k}")
    if s <= 0:
        raise RuntimeError(f"max_pool1d() stride must be greater than zero, but got {s}")
    if p < 0:
        raise RuntimeError(f"max_pool1d() padding must be non-negative, but got {p}")
    if p > k // 2:
        raise RuntimeError("max_pool1d() padding should be at most half of kernel size, but "
                           f"got padding={p} and kernel_size={k}")
    if d <= 0:
        raise RuntimeError(f"max_pool1d() dilation must be greater than zero, but got {d}")
    length = input.shape[-1]
    span = length + 2 * p - d * (k - 1) - 1
    out = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (out - 1) * s >= length + p:
        out -= 1
    if out <= 0:
        raise RuntimeError(f"max_pool1d() Invalid computed output size: {out}")
    if not return_indices:      # (ATen's max_pool1d_impl, which pools floating types only)
        floating_only(input, "max_pool1d_impl")
    res = max_pool2d(input.unsqueeze(-2), (1, k), (1, s), (0, p), (1, d), ceil_mode, True)
    values, indices = res[0].squeeze(-2), res[1].squeeze(-2)
    if not return_indices and not (grad_mode.state.grad_enabled and input.requires_grad):
        # (ATen's max_pool1d_impl, its pooling when no gradient is wanted: row-major)
        values = values.contiguous()
    return (values, indices) if return_indices else values


def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=True):
    """(values, indices) of max_pool1d."""
    return max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=True):
    """(values, indices) of max_pool2d."""
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def _check_p(p):
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _feature_noise(input):
    """A rand() of the feature-dropout noise shape: (N, C, 1, ..., 1)."""
    if input.dim() < 2:     # (ATen's make_feature_noise: a 1-D input has no channels)
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    shape = tuple(input.shape[:2]) + (1,) * (input.dim() - 2)
    return rand(shape, dtype=llgrad_float64, device=input.device)


def _dropout(input, p, training, inplace, feature, alpha):
    """ATen's _dropout_impl: feature picks the noise shape, alpha the SELU-preserving form."""
    if p == 0 or not training or input.numel() == 0:
        return input
    if p == 1:
        zero = input.new_zeros(())
        return input.mul_(zero) if inplace else input * zero
    if not input.is_floating_point():       # (ATen's float noise cannot be cast back)
        name = "Long" if alpha and input.dtype == bool_ else scalar_type_name(input.dtype)
        raise RuntimeError(f"result type Float can't be cast to the desired output type {name}")
    # ATen: noise.bernoulli_(1 - p), a double uniform per element (PyTorch's masks)
    u = _feature_noise(input) if feature else uniform_noise_like(input)
    keep = (u < 1 - p).to(input.dtype)
    if alpha:
        alpha_ = 1.7580993408473766
        a = 1.0 / math.sqrt((alpha_ * alpha_ * p + 1) * (1 - p))
        b = (keep - 1) * (alpha_ * a) + alpha_ * a * p
        noise = keep * a
        return input.mul_(noise).add_(b) if inplace else input * noise + b
    noise = keep / (1 - p)
    return input.mul_(noise) if inplace else input * noise


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Channel-wise dropout of (N, C, L) or (C, L) inputs."""
    _check_p(p)
    if input.dim() not in (2, 3):
        raise RuntimeError(f"dropout1d: Expected 2D or 3D input, but received a {input.dim()}D "
                           "input. Note that dropout1d exists to provide channel-wise dropout on "
                           "inputs with 1 spatial dimension, a channel dimension, and an optional "
                           "batch dimension (i.e. 2D or 3D inputs).")
    batched = input.dim() == 3
    x = input if batched else (input.unsqueeze_(0) if inplace else input.unsqueeze(0))
    out = _dropout(x, p, training, inplace, True, False)
    return out if batched else (out.squeeze_(0) if inplace else out.squeeze(0))


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Channel-wise dropout of (N, C, H, W) or (C, H, W) inputs (a 3-D input is taken as
    (N, C, L), with PyTorch's warnings)."""
    _check_p(p)
    nd = input.dim()
    if nd not in (3, 4):
        warnings.warn(f"dropout2d: Received a {nd}-D input to dropout2d, which is deprecated and "
                      "will result in an error in a future release. To retain the behavior and "
                      "silence this warning, please use dropout instead. Note that dropout2d "
                      "exists to provide channel-wise dropout on inputs with 2 spatial "
                      "dimensions, a channel dimension, and an optional batch dimension (i.e. 3D "
                      "or 4D inputs).", stacklevel=2)
    if nd == 3:
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that channel-wise "
                      "1D dropout behavior is desired - input is interpreted as shape (N, C, L), "
                      "where C is the channel dim. This behavior will change in a future release "
                      "to interpret the input as one without a batch dimension, i.e. shape (C, H, "
                      "W). To maintain the 1D channel-wise dropout behavior, please switch to "
                      "using dropout1d instead.", stacklevel=2)
    return _dropout(input, p, training, inplace, True, False)


def dropout3d(input, p=0.5, training=True, inplace=False):
    """Channel-wise dropout of (N, C, D, H, W) or (C, D, H, W) inputs."""
    _check_p(p)
    nd = input.dim()
    if nd not in (4, 5):
        warnings.warn(f"dropout3d: Received a {nd}-D input to dropout3d, which is deprecated and "
                      "will result in an error in a future release. To retain the behavior and "
                      "silence this warning, please use dropout instead. Note that dropout3d "
                      "exists to provide channel-wise dropout on inputs with 3 spatial "
                      "dimensions, a channel dimension, and an optional batch dimension (i.e. 4D "
                      "or 5D inputs).", stacklevel=2)
    batched = nd == 5
    x = input if batched else (input.unsqueeze_(0) if inplace else input.unsqueeze(0))
    out = _dropout(x, p, training, inplace, True, False)
    return out if batched else (out.squeeze_(0) if inplace else out.squeeze(0))


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Dropout that keeps SELU's self-normalisation (dropped values go to SELU's saturation,
    then an affine map restores the mean and variance)."""
    _check_p(p)
    return _dropout(input, p, training, inplace, False, True)


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    """alpha_dropout of whole channels."""
    _check_p(p)
    return _dropout(input, p, training, inplace, True, True)


def _blocks(size, k, d, p, s):
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def _fold_args(name, kernel_size, dilation, padding, stride):
    k, d, p, s = _pair(kernel_size), _pair(dilation), _pair(padding), _pair(stride)
    for what, v, low in (("kernel", k, 1), ("dilation", d, 1), ("stride", s, 1),
                         ("padding", p, 0)):
        if min(v) < low:
            raise RuntimeError(f"{what} should be {'greater than zero' if low else 'non-negative'}"
                               f", but got {what}_height: {v[0]} {what}_width: {v[1]}")
    return k, d, p, s


def _no_integers(x, kernel):
    """ATen's im2col / col2im kernels take floating, complex and bool tensors only (the
    refusal after the shape checks, as its dispatch)."""
    dt = x.dtype
    if not (dt.is_floating_point or dt.is_complex or dt == bool_):
        raise NotImplementedError(f'"{kernel}" not implemented for \'{scalar_type_name(dt)}\'')


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """im2col: (N, C, H, W) -> (N, C * kh * kw, L), L the sliding blocks in row-major order."""
    (kh, kw), (dh, dw), (ph, pw), (sh, sw) = _fold_args("unfold", kernel_size, dilation, padding,
                                                        stride)
    nd = input.dim()
    if nd == 0:
        raise IndexError("Dimension specified as 1 but tensor has no dimensions")
    if nd < 3:      # (PyTorch reads a spatial size past the last dim)
        raise IndexError(f"Dimension out of range (expected to be in range of [{-nd}, {nd - 1}], "
                         f"but got {nd})")
    if nd > 4 or 0 in tuple(input.shape)[-3:]:
        raise RuntimeError("Expected 3D or 4D (batch mode) tensor with possibly 0 batch size and "
                           "other non-zero dimensions for input, but got: "
                           f"{list(input.shape)}")
    batched = nd == 4
    x = input if batched else input.unsqueeze(0)
    n, c, h, w = x.shape
    oh, ow = _blocks(h, kh, dh, ph, sh), _blocks(w, kw, dw, pw, sw)
    if oh < 1 or ow < 1:
        raise RuntimeError(f"Given input with spatial size ({h}, {w}), kernel_size=({kh}, {kw}), "
                           f"dilation=({dh}, {dw}), padding=({ph}, {pw}), calculated shape of the "
                           f"array of sliding blocks as ({oh}, {ow}), but its components must be "
                           "at least one.")
    _no_integers(input, "im2col_out_cpu")
    xp = pad(x, (pw, pw, ph, ph)) if ph or pw else x
    cols = [xp[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh, j * dw:j * dw + sw * (ow - 1) + 1:sw]
            for i in range(kh) for j in range(kw)]
    out = stack(cols, 2).reshape(n, c * kh * kw, oh * ow)
    return rename(out if batched else out.squeeze(0), "Im2ColBackward0")


@meta_on_mismatch
def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """col2im, unfold's adjoint: each block's values are added into an (N, C, H, W) output."""
    (kh, kw), (dh, dw), (ph, pw), (sh, sw) = _fold_args("fold", kernel_size, dilation, padding,
                                                        stride)
    h, w = _pair(output_size)
    if input.dim() not in (2, 3):
        raise RuntimeError("Expected 2D or 3D (batch mode) tensor for input with possibly 0 "
                           "batch size and non-zero dimensions for input, but got: "
                           f"{list(input.shape)}")
    batched = input.dim() == 3
    x = input if batched else input.unsqueeze(0)
    n, ckk, length = x.shape
    if ckk % (kh * kw):
        raise RuntimeError("Expected size of input's dimension 1 to be divisible by the product "
                           f"of kernel_size, but got input.size(1)={ckk} and "
                           f"kernel_size=({kh}, {kw}).")
    oh, ow = _blocks(h, kh, dh, ph, sh), _blocks(w, kw, dw, pw, sw)
    if oh * ow != length:
        raise RuntimeError(f"Given output_size=({h}, {w}), kernel_size=({kh}, {kw}), dilation=("
                           f"{dh}, {dw}), padding=({ph}, {pw}), stride=({sh}, {sw}), expected size "
                           f"of input's dimension 2 to match the calculated number of sliding "
                           f"blocks {oh} * {ow} = {oh * ow}, but got input.size(2)={length}.")
    _no_integers(input, "col2im_out_cpu")
    c = ckk // (kh * kw)
    blocks = x.reshape(n, c, kh * kw, oh, ow)
    out = zeros(n, c, h + 2 * ph, w + 2 * pw, dtype=input.dtype)
    for i in range(kh):
        for j in range(kw):
            out[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh,
                j * dw:j * dw + sw * (ow - 1) + 1:sw] += blocks[:, :, i * kw + j]
    out = out[:, :, ph:ph + h, pw:pw + w].clone()     # (a tensor of its own, not a view)
    return rename(out if batched else out.squeeze(0), "Col2ImBackward0")
