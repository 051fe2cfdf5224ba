"""F.conv2d and F.max_pool2d: PyTorch's argument checks and errors, then one op of the table
each. conv2d pads what the convolution op does not (other padding modes, uneven 'same'
padding: a filled tensor or an index_select) and calls `convolution` (llgrad/ir/ops_conv.py);
max_pool2d calls `max_pool2d_with_indices` (llgrad/ir/ops_pool.py: the first maximum of
each window, its index and the gradient routed there, as PyTorch)."""
import numpy as np

from ..backends.cpu import onednn_half
from ..ir.ops_pool import out_size
from ..runtime.creation import tensor as _tensor
from ..runtime.functions_settings import warn_once
from ..runtime.result_format import formatted, in_suggested_format
from ..runtime.user_frames import user_stacklevel
from ..runtime.tensor import Tensor
from ..runtime.autocast_cast import autocast_lower


def _pair(x):
    if isinstance(x, (tuple, list)):
        return tuple(x)
    return (x, x)


def _filled_pad(x, top, bottom, left, right, value):
    """x (N, C, H, W) padded with `value`: a filled tensor into which x is written."""
    if not (top or bottom or left or right):
        return x.contiguous()
    n, c, h, w = x.shape
    out = x.new_full((n, c, h + top + bottom, w + left + right), value)   # (batched in vmap)
    out[:, :, top:top + h, left:left + w] = x
    return out


def _index_pad(x, top, bottom, left, right, mode):
    """'reflect', 'replicate' or 'circular' padding of x (N, C, H, W), by advanced indexing."""
    h, w = x.shape[-2:]
    # (ATen's order and numbering: the width, padding argument #4, before the height, #6)
    for (lo, hi), size, dim, arg in (((left, right), w, 3, 4), ((top, bottom), h, 2, 6)):
        if mode == "reflect" and (lo >= size or hi >= size):
            raise RuntimeError(f"Argument #{arg}: Padding size should be less than the "
                               f"corresponding input dimension, but got: padding ({lo}, {hi}) "
                               f"at dimension {dim} of input {list(x.shape)}")
        if mode == "circular" and (lo > size or hi > size):
            raise RuntimeError("Padding value causes wrapping around more than once.")

    def idx(lo, hi, size):
        i = np.arange(-lo, size + hi)
        if mode == "reflect":
            i = np.abs(i)
            i = np.where(i >= size, 2 * (size - 1) - i, i)
        elif mode == "replicate":
            i = np.clip(i, 0, size - 1)
        else:
            i = i % size
        return i

    ih = _tensor(idx(top, bottom, h))
    iw = _tensor(idx(left, right, w))
    return x[:, :, ih.unsqueeze(1), iw.unsqueeze(0)].contiguous()


# (PyTorch's TORCH_WARN_ONCE in ATen's convolution, one for conv1d, conv2d and conv3d)
SAME_ODD_WARNING = ("Using padding='same' with even kernel lengths and odd dilation may require "
                    "a zero-padded copy of the input be created")


def check_conv_args(name, input, weight, bias, nd=None):
    """PyTorch's TypeError for an operand that is not a tensor (a NumPy array has .ndim and
    would fail deep inside), and its errors for a weight of another rank than an nd-d
    convolution's (nd given) and a bias that is not one number per output channel."""
    if not all(isinstance(x, Tensor) for x in (input, weight) + (() if bias is None else (bias,))):
        got = ", ".join(_type_name(x) for x in (input, weight, bias) if x is not None)
        raise TypeError(f"{name}() received an invalid combination of arguments - got ({got}), "
                        "but expected (Tensor input, Tensor weight, Tensor bias = None, ...)")
    if nd is not None and weight.ndim != nd + 2:    # (ATen expands stride to its rank first)
        raise RuntimeError(f"expected stride to be a single integer value or a list of "
                           f"{weight.ndim - 2} values to match the convolution dimensions, but "
                           f"got stride={[1] * nd}\n(a weight of size {list(weight.shape)} "
                           f"for {name})")
    if bias is not None and (bias.ndim != 1 or bias.shape[0] != weight.shape[0]):
        raise RuntimeError(f"Given weight of size {list(weight.shape)}, expected bias to be "
                           f"1-dimensional with {weight.shape[0]} elements, but got bias of "
                           f"size {list(bias.shape)} instead")


def check_conv_numbers(stride, padding, dilation, groups, output_padding=()):
    """ATen's checks of a convolution's numbers, made before its shape checks: a negative
    padding or dilation would otherwise give a result PyTorch refuses, a zero stride or
    groups a ZeroDivisionError (a zero dilation: check_zero_dilation, after the shapes)."""
    seq = lambda v: v if isinstance(v, (tuple, list)) else (v,)    # noqa: E731
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    if not isinstance(padding, str) and any(p < 0 for p in seq(padding)):
        raise RuntimeError("negative padding is not supported")
    if any(p < 0 for p in seq(output_padding)):
        raise RuntimeError("negative output_padding is not supported")
    if any(s <= 0 for s in seq(stride)):
        raise RuntimeError("non-positive stride is not supported")
    if any(d < 0 for d in seq(dilation)):
        raise RuntimeError("dilation should be greater than zero")


def check_zero_dilation(dilation, transposed=False):
    """A zero dilation passes the shape checks; PyTorch's kernels then refuse it (in the slow
    path's words, those of small inputs; its oneDNN path of large float32 ones has others)."""
    if 0 in tuple(dilation):
        got = (f"dilation_height: {dilation[0]}, dilation_width: {dilation[1]}" if transposed
               else list(dilation))
        raise RuntimeError(f"dilation should be greater than zero, but got {got}")


def _type_name(x):
    t = type(x)
    return t.__name__ if isinstance(x, Tensor) or t.__module__ == "builtins" else \
        f"{t.__module__.split('.')[0]}.{t.__name__}"


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1,
           padding_mode="zeros"):
    """PyTorch's F.conv2d (plus padding_mode, which PyTorch applies in the module); the
    result is channels_last where the input or the weight is, as ATen's."""
    input, weight, bias = autocast_lower(input, weight, bias)
    if not isinstance(input, Tensor) or input.ndim != 4:     # (its checks raise torch's errors)
        return row_major_conv2d(input, weight, bias, stride, padding, dilation, groups,
                                padding_mode)
    return formatted(lambda: row_major_conv2d(input, weight, bias, stride, padding, dilation,
                                              groups, padding_mode), input, weight)


def row_major_conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1,
                     padding_mode="zeros"):
    """F.conv2d with a row-major result (conv1d's and conv_transpose2d's inner call)."""
    check_conv_args("conv2d", input, weight, bias, 2)
    if input.ndim not in (3, 4):
        raise RuntimeError("Expected 3D (unbatched) or 4D (batched) input to conv2d, but got "
                           f"input of size: {list(input.shape)}")
    if input.ndim == 3:
        return conv2d(input.unsqueeze(0), weight, bias, stride, padding, dilation, groups,
                      padding_mode).squeeze(0)
    stride, dilation = _pair(stride), _pair(dilation)
    check_conv_numbers(stride, padding if isinstance(padding, str) else _pair(padding),
                       dilation, groups)
    n, c, h, w = input.shape
    o, cg, kh, kw = weight.shape
    if o % groups:      # (ATen's order: before the channels)
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} "
                           f"at dimension 0, but got weight of size [{list(weight.shape)}] "
                           "instead")
    if cg * groups != c:
        raise RuntimeError(f"Given groups={groups}, weight of size {list(weight.shape)}, expected "
                           f"input{list(input.shape)} to have {cg * groups} channels, but got "
                           f"{c} channels instead")
    if isinstance(padding, str):
        if padding == "valid":
            pads = (0, 0, 0, 0)
        elif padding == "same":
            if any(s != 1 for s in stride):
                raise RuntimeError("padding='same' is not supported for strided convolutions")
            th, tw = dilation[0] * (kh - 1), dilation[1] * (kw - 1)
            pads = (th // 2, th - th // 2, tw // 2, tw - tw // 2)
            if (th % 2 or tw % 2) and padding_mode == "zeros":
                warn_once("conv_same_odd", SAME_ODD_WARNING, stacklevel=user_stacklevel() + 1)
        else:
            raise RuntimeError(f"Invalid padding string: '{padding}'")
    else:
        ph, pw = _pair(padding)
        pads = (ph, ph, pw, pw)
    if pads[0] == pads[1] and pads[2] == pads[3] and padding_mode == "zeros":
        xp, sym = input, (pads[0], pads[2])         # the op pads (symmetric zeros) itself
    else:
        xp, sym = _filled_pad(input, *pads, 0) if padding_mode == "zeros" else \
            _index_pad(input, *pads, padding_mode), (0, 0)
    hp, wp = xp.shape[-2] + 2 * sym[0], xp.shape[-1] + 2 * sym[1]
    ekh, ekw = dilation[0] * (kh - 1) + 1, dilation[1] * (kw - 1) + 1
    if hp < ekh or wp < ekw:
        raise RuntimeError(f"Calculated padded input size per channel: ({hp} x {wp}). Kernel "
                           f"size: ({ekh} x {ekw}). Kernel size can't be greater than actual "
                           "input size")
    check_zero_dilation(dilation)
    check_conv_dtypes(input, weight, bias, dilation=dilation)
    return xp._op("convolution", weight, bias, stride=stride, padding=sym, dilation=dilation,
                  groups=groups)


def check_conv_dtypes(input, weight, bias, transposed=False, dilation=()):
    """ATen's convolution: the bias's dtype is checked first (not by the transposed ones,
    which promote it), then the weight's, in the words of the kernel the input's dtype
    selects (a half input: the oneDNN check, where PyTorch runs float16 on oneDNN), after
    the integer and bool inputs that kernel refuses."""
    if not transposed and bias is not None and bias.dtype != input.dtype:
        raise RuntimeError(f"Input type ({_c_name(input.dtype)}) and bias type "
                           f"({_c_name(bias.dtype)}) should be the same")
    _check_conv_kernel(input, transposed, dilation)     # (the kernel ATen dispatches to)
    if weight.dtype != input.dtype:
        if input.dtype.name == "float16" and onednn_half():
            raise RuntimeError(f"Input type ({input.type()}) and weight type ({weight.type()}) "
                               "should be the same or input should be a MKLDNN tensor and "
                               "weight is a dense tensor")
        raise RuntimeError(f"expected scalar type {_scalar_name(input.dtype)} but found "
                           f"{_scalar_name(weight.dtype)}")
    if transposed and input.dtype.name == "float16" and bias is not None and \
            bias.dtype != input.dtype and onednn_half():
        raise RuntimeError(f"Input type ({input.type()}) and bias type ({bias.type()}) should "
                           "be the same or input should be a MKLDNN tensor and bias is a dense "
                           "tensor")


def _check_conv_kernel(input, transposed, dilation):
    """PyTorch's CPU kernels take integer inputs only in the plain convolution (int64 in all
    of them) and bool in none: the NotImplementedError of the kernel the call would run."""
    name = input.dtype.name
    if name == "int64" or not (name == "bool" or name.startswith(("int", "uint"))):
        return
    three = input.dim() == 5
    if transposed:
        kernel = f"slow_conv_transpose{3 if three else 2}d_out_cpu"
    elif any(d != 1 for d in dilation):
        kernel = "slow_conv_dilated<>"
    elif name == "bool":
        kernel = "compute_columns3d" if three else "slow_conv2d_cpu"
    else:
        return
    raise NotImplementedError(f'"{kernel}" not implemented for \'{_scalar_name(input.dtype)}\'')


def _c_name(dtype):
    return {"Float": "float", "Double": "double", "Half": "c10::Half", "Long": "long int",
            "Int": "int", "Short": "short int", "Char": "signed char", "Byte": "unsigned char",
            "Bool": "bool"}.get(_scalar_name(dtype), _scalar_name(dtype))


def _short(dtype):
    return str(dtype).replace("llgrad.", "").replace("torch.", "")


def _scalar_name(dtype):
    names = {"float32": "Float", "float64": "Double", "float16": "Half", "int64": "Long",
             "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool"}
    return names.get(_short(dtype), _short(dtype))


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """PyTorch's F.max_pool2d; the gradient goes to the first maximum of each window."""
    kh, kw = _pair(kernel_size)
    if stride is None or (isinstance(stride, (tuple, list)) and len(stride) == 0):
        stride = (kh, kw)
    (sh, sw), (ph, pw), (dh, dw) = _pair(stride), _pair(padding), _pair(dilation)
    if kh <= 0 or kw <= 0:
        raise RuntimeError(f"max_pool2d: kernel_size must be greater than zero, but got kH: {kh} "
                           f"kW: {kw}")
    if sh <= 0 or sw <= 0:
        raise RuntimeError(f"max_pool2d: stride must be greater than zero, but got dH: {sh} "
                           f"dW: {sw}")
    if dh <= 0 or dw <= 0:
        raise RuntimeError(f"max_pool2d: dilation must be greater than zero, but got dilationH: "
                           f"{dh} dilationW: {dw}")
    for pv, kv, dv in ((ph, kh, dh), (pw, kw, dw)):
        if pv > ((kv - 1) * dv + 1) // 2:
            raise RuntimeError(f"pad should be at most half of effective kernel size, but got "
                               f"pad={pv}, kernel_size={kv} and dilation={dv}")
    if kw // 2 < pw or kh // 2 < ph:
        raise RuntimeError(f"pad should be smaller than or equal to half of kernel size, but got "
                           f"padW = {pw}, padH = {ph}, kW = {kw}, kH = {kh}")
    if input.ndim not in (3, 4):
        raise RuntimeError("non-empty 3D or 4D (batch mode) tensor expected for input")
    if 0 in input.shape[-3:]:       # (a batch of 0 is PyTorch's)
        raise RuntimeError("Expected 3D or 4D (batch mode) tensor with optional 0 dim batch "
                           f"size for input, but got:{list(input.shape)}")
    c, h, w = input.shape[-3:]
    oh, ow = out_size(h, kh, ph, sh, dh, ceil_mode), out_size(w, kw, pw, sw, dw, ceil_mode)
    if oh < 1 or ow < 1:
        raise RuntimeError(f"Given input size: ({c}x{h}x{w}). Calculated output size: "
                           f"({c}x{oh}x{ow}). Output size is too small")
    if input.dtype.name == "bool":
        raise NotImplementedError('"max_pool2d" not implemented for \'Bool\'')
    pairs = [(int(a), int(b)) for a, b in ((kh, kw), (sh, sw), (ph, pw), (dh, dw))]
    values, indices = input._op("max_pool2d_with_indices", kernel_size=pairs[0],
                                stride=pairs[1], padding=pairs[2], dilation=pairs[3],
                                ceil_mode=bool(ceil_mode))
    values = in_suggested_format(values, input)
    return (values, in_suggested_format(indices, input)) if return_indices else values
