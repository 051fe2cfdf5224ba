"""F.conv1d, F.conv_transpose1d and F.conv_transpose2d over F.conv2d (functional_conv.py).

conv1d is conv2d over a unit height. A transposed convolution is the convolution whose
gradient with respect to its input a convolution is: the input spread out by the stride
(zeros between its elements), bordered by dilation * (kernel - 1) - padding zeros on each
side (cropped where that is negative) and output_padding more at the end, convolved at
stride 1 with the kernel flipped and its in/out channels swapped within each group.
conv_transpose2d is the op convolution_backward_input itself (it never multiplies the
spread's zeros); only where output_padding is not below the stride is it the convolution
of the spread input (one zero buffer the input is written into through a strided slice)."""
import numpy as np

from ..runtime.creation import tensor as _tensor
from ..runtime.node_names import rename
from .functional_conv import (_pair, check_conv_args, check_conv_dtypes, check_conv_numbers,
                              check_zero_dilation, conv2d, row_major_conv2d)
from ..runtime.autocast_cast import autocast_lower
from ..runtime.result_format import in_suggested_format


def _n(v, n):
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * n


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1,
           padding_mode="zeros"):
    """As torch.nn.functional.conv1d (conv2d over a unit height)."""
    input, weight, bias = autocast_lower(input, weight, bias)
    check_conv_args("conv1d", input, weight, bias)
    if input.dim() not in (2, 3):
        raise RuntimeError("Expected 2D (unbatched) or 3D (batched) input to conv1d, but got "
                           f"input of size: {list(input.shape)}")
    if weight.dim() != 3:
        raise RuntimeError(f"Expected {weight.dim()}-dimensional input for {weight.dim()}-"
                           f"dimensional weight {list(weight.shape)}, but got {input.dim()}-"
                           f"dimensional input of size {list(input.shape)} instead")
    if input.dim() == 2:
        return conv1d(input.unsqueeze(0), weight, bias, stride, padding, dilation, groups,
                      padding_mode).squeeze(0)
    check_conv_numbers(stride, padding, dilation, groups)
    _check_groups(input, weight, groups, False)
    (s,), (d,) = _n(stride, 1), _n(dilation, 1)
    p = padding if isinstance(padding, str) else (0, _n(padding, 1)[0])
    n, c, length = input.shape
    if not isinstance(padding, str) and length + 2 * p[1] < d * (weight.shape[2] - 1) + 1:
        raise RuntimeError(f"Calculated padded input size per channel: ({length + 2 * p[1]}). "
                           f"Kernel size: ({d * (weight.shape[2] - 1) + 1}). Kernel size can't "
                           "be greater than actual input size")
    if padding_mode == "reflect" and not isinstance(padding, str) and p[1] >= length:
        # (here, not in the unit-height conv2d: the error names the input the caller gave)
        raise RuntimeError("Argument #4: Padding size should be less than the corresponding "
                           f"input dimension, but got: padding ({p[1]}, {p[1]}) at dimension 2 "
                           f"of input {list(input.shape)}")
    out = row_major_conv2d(input.unsqueeze(2), weight.unsqueeze(2), bias, (1, s), p, (1, d),
                           groups, padding_mode)
    return rename(out.squeeze(2), "ConvolutionBackward0")


def _check_groups(input, weight, groups, transposed):
    if weight.shape[0] % groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} "
                           f"at dimension 0, but got weight of size [{list(weight.shape)}] "
                           "instead")
    c = input.shape[1]
    want = weight.shape[0] if transposed else weight.shape[1] * groups
    if c != want:
        t = "transposed=1" if transposed else f"groups={groups}"
        raise RuntimeError(f"Given {t}, weight of size {list(weight.shape)}, expected "
                           f"input{list(input.shape)} to have {want} channels, but got {c} "
                           "channels instead")


def _spread(n, k, s, p, op, d):
    """(buffer length, slice of the input, slice of the buffer it is written to) of one dim:
    input element i sits at q + i * s, q = d * (k - 1) - p, in a buffer of the output's
    length plus d * (k - 1)."""
    q = d * (k - 1) - p
    length = (n - 1) * s + 1 + 2 * q + op
    first = 0 if q >= 0 else (-q + s - 1) // s
    last = min(n - 1, (length - 1 - q) // s)
    if last < first:
        return length, slice(0, 0), slice(0, 0)
    start = q + first * s
    return length, slice(first, last + 1), slice(start, start + (last - first) * s + 1, s)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0,
                     groups=1, dilation=1):
    """As torch.nn.functional.conv_transpose2d."""
    input, weight, bias = autocast_lower(input, weight, bias)
    check_conv_args("conv_transpose2d", input, weight, None, 2)     # (its bias: below)
    if input.dim() not in (3, 4):
        raise RuntimeError("Expected 3D (unbatched) or 4D (batched) input to conv_transpose2d, "
                           f"but got input of size: {list(input.shape)}")
    if input.dim() == 3:
        return conv_transpose2d(input.unsqueeze(0), weight, bias, stride, padding,
                                output_padding, groups, dilation).squeeze(0)
    s, p, op, d = _pair(stride), _pair(padding), _pair(output_padding), _pair(dilation)
    check_conv_numbers(s, p, d, groups, op)
    if any(o >= max(sv, dv) for o, sv, dv in zip(op, s, d)):
        raise RuntimeError("output padding must be smaller than either stride or dilation, but "
                           f"got output_padding_height: {op[0]} output_padding_width: {op[1]} "
                           f"stride_height: {s[0]} stride_width: {s[1]} dilation_height: "
                           f"{d[0]} dilation_width: {d[1]}")
    _check_groups(input, weight, groups, True)
    check_zero_dilation(d, transposed=True)
    check_conv_dtypes(input, weight, bias, transposed=True)
    if bias is not None and bias.dtype != input.dtype:    # (ATen adds it in the input's dtype)
        bias = bias.to(input.dtype)
    cin, coutg, kh, kw = weight.shape
    if bias is not None and (bias.dim() != 1 or bias.shape[0] != coutg * groups):
        raise RuntimeError(f"Given transposed=1, weight of size {list(weight.shape)}, expected "
                           f"bias to be 1-dimensional with {coutg * groups} elements, but got "
                           f"bias of size {list(bias.shape)} instead")
    n, _, h, w = input.shape
    out_hw = tuple((size - 1) * sv - 2 * pv + dv * (k - 1) + o + 1 for size, k, sv, pv, o, dv
                   in zip((h, w), (kh, kw), s, p, op, d))
    if min(out_hw) >= 1 and all(o < sv for o, sv in zip(op, s)):
        # the input gradient of the convolution of an out_hw image by `weight` (whose layout,
        # (in, out / groups, kh, kw), is that convolution's): no zeros are multiplied
        out = input._op("convolution_backward_input", weight, input_size=out_hw, stride=s,
                        padding=p, dilation=d, groups=groups)
        if bias is not None:
            out = out + bias.reshape(1, -1, 1, 1)
        return in_suggested_format(rename(out, "ConvolutionBackward0"), input, weight)
    # (an output_padding of a stride or more, past a dilation: the spread-out input below)
    (lh, ih, bh), (lw, iw, bw) = (_spread(size, k, sv, pv, o, dv) for size, k, sv, pv, o, dv in
                                  zip((h, w), (kh, kw), s, p, op, d))
    if lh - d[0] * (kh - 1) < 1 or lw - d[1] * (kw - 1) < 1:
        raise RuntimeError(f"conv_transpose2d: the output size ({lh - d[0] * (kh - 1)} x "
                           f"{lw - d[1] * (kw - 1)}) is too small")
    z = input.new_zeros((n, cin, lh, lw))       # (batched under llgrad.func.vmap)
    z[:, :, bh, bw] = input[:, :, ih, iw]
    # (cin, cout/g, kh, kw) -> (cout, cin/g, kh, kw), flipped in space
    wt = weight.reshape(groups, cin // groups, coutg, kh, kw).transpose(1, 2) \
        .reshape(groups * coutg, cin // groups, kh, kw)
    wt = wt.index_select(2, _tensor(np.arange(kh - 1, -1, -1))) \
        .index_select(3, _tensor(np.arange(kw - 1, -1, -1)))
    return in_suggested_format(row_major_conv2d(z, wt, bias, 1, 0, d, groups), input, weight)


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0,
                     groups=1, dilation=1):
    """As torch.nn.functional.conv_transpose1d."""
    input, weight, bias = autocast_lower(input, weight, bias)
    if input.dim() not in (2, 3):
        raise RuntimeError("Expected 2D (unbatched) or 3D (batched) input to conv_transpose1d, "
                           f"but got input of size: {list(input.shape)}")
    (s,), (p,), (op,), (d,) = (_n(v, 1) for v in (stride, padding, output_padding, dilation))
    # (PyTorch's result is channels_last-like only when the weight is: input's layout is
    # not read, so a transposed input must not suggest channels_last to the 2-d kernel)
    out = conv_transpose2d(input.contiguous().unsqueeze(-2), weight.unsqueeze(-2), bias,
                           (1, s), (0, p), (0, op), groups, (1, d))
    return rename(out.squeeze(-2), "ConvolutionBackward0") if input.dim() == 3 \
        else out.squeeze(-2)
