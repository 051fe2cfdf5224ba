"""F.conv3d and F.conv_transpose3d: PyTorch's argument checks and messages (torch 2.13's
at::convolution), then the `convolution3d` op of the table (llgrad/ir/ops_conv3d.py: the 2-D
convolution over depth windows; grad_fn ConvolutionBackward0).

padding='same' pads symmetrically where the total padding of a dim is even and pads the
input by one more at the end of the others first (PyTorch's _convolution_mode). A transposed
convolution is the convolution whose input gradient it is, as conv_transpose2d
(functional_convt.py): the input spread out by the stride in a zero buffer, bordered by
dilation * (kernel - 1) - padding, convolved at stride 1 with the kernel flipped and its
channels swapped within each group."""

from ..runtime.functions_settings import warn_once
from ..runtime.result_format import in_suggested_format
from .functional_conv import SAME_ODD_WARNING, _c_name, _scalar_name, check_conv_dtypes
from .functional_convt import _spread
from .functional_pad import pad as _pad
from ..runtime.autocast_cast import autocast_lower


def _expand(v, name, n=3):
    """An int or a list of n ints (PyTorch's expand_param_if_needed)."""
    if isinstance(v, (tuple, list)):
        v = [int(x) for x in v]
        if len(v) == 1:
            return tuple(v) * n
        if len(v) != n:
            raise RuntimeError(f"expected {name} to be a single integer value or a list of {n} "
                               f"values to match the convolution dimensions, but got {name}="
                               f"{v}")
        return tuple(v)
    return (int(v),) * n


def _check_input(input, fn):
    if input.dim() not in (4, 5):
        raise RuntimeError(f"Expected 4D (unbatched) or 5D (batched) input to {fn}, but got "
                           f"input of size: {list(input.shape)}")


def _check_weight_dims(weight, *params):
    """PyTorch's expansion of the triples to the weight's spatial dims: a weight of another
    rank fails on the first parameter, as at::_convolution does."""
    if weight.dim() < 3:
        raise RuntimeError("weight should have at least three dimensions")
    n = weight.dim() - 2
    if n != 3:
        for name, v in zip(("stride", "padding", "dilation", "output_padding"), params):
            if not isinstance(v, str):
                raise RuntimeError(f"expected {name} to be a single integer value or a list of "
                                   f"{n} values to match the convolution dimensions, but got "
                                   f"{name}={list(v)}")


def _check_common(input, weight, groups, stride, padding, dilation, output_padding=(0, 0, 0)):
    """check_shape_forward's checks that transposed and plain convolutions share."""
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    if any(p < 0 for p in padding):
        raise RuntimeError("negative padding is not supported")
    if any(p < 0 for p in output_padding):
        raise RuntimeError("negative output_padding is not supported")
    if any(s <= 0 for s in stride):
        raise RuntimeError("non-positive stride is not supported")
    if any(d < 0 for d in dilation):
        raise RuntimeError("dilation should be greater than zero")
    w = list(weight.shape)
    if weight.dim() != input.dim():
        raise RuntimeError(f"Expected {weight.dim()}-dimensional input for {weight.dim()}-"
                           f"dimensional weight {w}, but got {input.dim()}-dimensional input "
                           f"of size {list(input.shape)} instead")
    if w[0] < groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be at least {groups} at "
                           f"dimension 0, but got weight of size {w} instead")
    if w[0] % groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} "
                           f"at dimension 0, but got weight of size [{w}] instead")


def _check_zero_dilation(input, dilation):
    """A zero dilation passes the shape checks; PyTorch's kernels then refuse it, each in its
    own words (float32's oneDNN path, the slow path of the other dtypes)."""
    if 0 in dilation:
        if input.dtype.name == "float32":
            raise RuntimeError("non-positive dilation is not supported")
        raise RuntimeError(f"dilation should be greater than zero, but got {list(dilation)}")


def _check_bias_type(input, bias):
    if bias is not None and bias.dtype != input.dtype:
        raise RuntimeError(f"Input type ({_c_name(input.dtype)}) and bias type "
                           f"({_c_name(bias.dtype)}) should be the same")


def _same_padding(input, weight, dilation):
    """(input padded at the end where a dim's total is odd, symmetric padding)."""
    totals = [d * (k - 1) for d, k in zip(dilation, weight.shape[2:])]
    left = [t // 2 for t in totals]
    extra = [t - 2 * lo for t, lo in zip(totals, left)]
    if any(extra):
        warn_once("conv_same_odd", SAME_ODD_WARNING, stacklevel=4)
        pads = []
        for e in reversed(extra):
            pads += [0, e]
        input = _pad(input, pads)
    return input, tuple(left)


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """As torch.nn.functional.conv3d (padding an int, a triple, 'valid' or 'same')."""
    input, weight, bias = autocast_lower(input, weight, bias)
    if isinstance(padding, str):            # (PyTorch's _convolution_mode checks these first)
        if padding not in ("valid", "same"):
            raise RuntimeError(f"Invalid padding string: '{padding}'")
        steps = stride if isinstance(stride, (tuple, list)) else (stride,)
        if padding == "same" and any(s != 1 for s in steps):
            raise RuntimeError("padding='same' is not supported for strided convolutions")
    _check_bias_type(input, bias)
    _check_input(input, "conv3d")
    if input.dim() == 4:
        return conv3d(input.unsqueeze(0), weight, bias, stride, padding, dilation,
                      groups).squeeze(0)
    stride, dilation = _expand(stride, "stride"), _expand(dilation, "dilation")
    _check_weight_dims(weight, stride, padding, dilation)
    if padding == "valid":
        padding = (0, 0, 0)
    elif padding == "same":
        input, padding = _same_padding(input, weight, dilation)
    padding = _expand(padding, "padding") if not isinstance(padding, str) else (0, 0, 0)
    _check_common(input, weight, groups, stride, padding, dilation)
    w = list(weight.shape)
    if input.shape[1] != w[1] * groups:
        raise RuntimeError(f"Given groups={groups}, weight of size {w}, expected input"
                           f"{list(input.shape)} to have {w[1] * groups} channels, but got "
                           f"{input.shape[1]} channels instead")
    if bias is not None and (bias.dim() != 1 or bias.shape[0] != w[0]):
        raise RuntimeError(f"Given weight of size {w}, expected bias to be 1-dimensional with "
                           f"{w[0]} elements, but got bias of size {list(bias.shape)} instead")
    padded = [n + 2 * p for n, p in zip(input.shape[2:], padding)]
    kernel = [d * (k - 1) + 1 for d, k in zip(dilation, w[2:])]
    if any(p < k for p, k in zip(padded, kernel)):
        raise RuntimeError("Calculated padded input size per channel: ("
                           + " x ".join(map(str, padded)) + "). Kernel size: ("
                           + " x ".join(map(str, kernel)) + "). Kernel size can't be greater "
                           "than actual input size")
    _check_zero_dilation(input, dilation)
    check_conv_dtypes(input, weight, bias, dilation=dilation)
    out = input._op("convolution3d", weight, bias, stride=stride, padding=padding,
                    dilation=dilation, groups=int(groups))
    return _in_mkldnn_format(out, input, weight)


def _in_mkldnn_format(out, input, weight):
    """out channels_last_3d where the input or the weight is, as ATen's CPU convolution
    allocates it when its mkldnn kernel runs (float32 and bfloat16); row-major otherwise
    (slow_conv3d, float64 and float16, whatever the operands' layouts)."""
    if input.dtype.name not in ("float32", "bfloat16"):
        return out
    return in_suggested_format(out, input, weight)


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """As torch.nn.functional.conv_transpose3d."""
    input, weight, bias = autocast_lower(input, weight, bias)
    _check_input(input, "conv_transpose3d")
    if input.dim() == 4:
        return conv_transpose3d(input.unsqueeze(0), weight, bias, stride, padding,
                                output_padding, groups, dilation).squeeze(0)
    s, p = _expand(stride, "stride"), _expand(padding, "padding")
    op, d = _expand(output_padding, "output_padding"), _expand(dilation, "dilation")
    _check_weight_dims(weight, s, p, d, op)
    _check_common(input, weight, groups, s, p, d, op)
    w = list(weight.shape)
    if input.shape[1] != w[0]:
        raise RuntimeError(f"Given transposed=1, weight of size {w}, expected input"
                           f"{list(input.shape)} to have {w[0]} channels, but got "
                           f"{input.shape[1]} channels instead")
    if bias is not None and (bias.dim() != 1 or bias.shape[0] != w[1] * groups):
        raise RuntimeError(f"Given transposed=1, weight of size {w}, expected bias to be "
                           f"1-dimensional with {w[1] * groups} elements, but got bias of size "
                           f"{list(bias.shape)} instead")
    if any(o >= max(sv, dv) for o, sv, dv in zip(op, s, d)):
        raise RuntimeError("output padding must be smaller than either stride or dilation, but "
                           f"got output_padding_depth: {op[0]} output_padding_height: {op[1]} "
                           f"output_padding_width: {op[2]} stride_depth: {s[0]} stride_height: "
                           f"{s[1]} stride_width: {s[2]} dilation_depth: {d[0]} "
                           f"dilation_height: {d[1]} dilation_width: {d[2]}")
    _check_zero_dilation(input, d)
    check_conv_dtypes(input, weight, bias, transposed=True)
    if bias is not None and bias.dtype != input.dtype:
        raise RuntimeError(f"expected scalar type {_scalar_name(input.dtype)} but found "
                           f"{_scalar_name(bias.dtype)}")
    cin, coutg = w[0], w[1]
    k = w[2:]
    spread = [_spread(n, kv, sv, pv, o, dv) for n, kv, sv, pv, o, dv in
              zip(input.shape[2:], k, s, p, op, d)]
    sizes = [length - dv * (kv - 1) for (length, _, _), kv, dv in zip(spread, k, d)]
    if any(n < 1 for n in sizes):
        raise RuntimeError(f"Given input size per channel: ({' x '.join(map(str, input.shape[2:]))}"
                           f"). Calculated output size per channel: "
                           f"({' x '.join(map(str, sizes))}). Output size is too small")
    z = input.new_zeros((input.shape[0], cin) + tuple(length for length, _, _ in spread))
    z[(slice(None), slice(None)) + tuple(b for _, _, b in spread)] = \
        input[(slice(None), slice(None)) + tuple(i for _, i, _ in spread)]
    # (cin, cout/g, kd, kh, kw) -> (cout, cin/g, kd, kh, kw), flipped in space
    wt = weight.reshape([groups, cin // groups, coutg] + k).transpose(1, 2) \
        .reshape([groups * coutg, cin // groups] + k).flip((2, 3, 4))
    return _in_mkldnn_format(conv3d(z, wt, bias, 1, 0, d, groups), input, weight)
