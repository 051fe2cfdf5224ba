"""F.pixel_shuffle / pixel_unshuffle / channel_shuffle (reshape, permute, reshape: PyTorch's
own compositions) and F.bilinear (a matrix product and a sum), plus the in-place activation
functions F.relu_, elu_, leaky_relu_, hardtanh_, selu_, celu_ and threshold_."""
from ..runtime.dtypes import C_NAMES
from ..runtime.memory_formats import suggested
from ..runtime.node_names import no_derivative, rename
from . import functional_activation as _act


def _at_least_3d(input, name):
    if input.dim() < 3:
        raise RuntimeError(f"{name} expects input to have at least 3 dimensions, but got input "
                           f"with {input.dim()} dimension(s)")


def _in_format_of(out, input, only_2d=False):
    """out laid out in input's suggested memory format, as the CPU kernels allocate their
    outputs (pixel_(un)shuffle's take channels_last or row-major only), and never a view of
    input (their outputs are new tensors: a write to one must not reach input)."""
    fmt = suggested(input)
    if only_2d and fmt not in ("contiguous", "channels_last"):
        raise RuntimeError("Unsupported memory format. Supports only ChannelsLast, Contiguous")
    if fmt != "contiguous":
        out = out.contiguous(memory_format=fmt)
    base = input if input._base is None else input._base
    if out is input or out._base is base:     # (a trivial shuffle: a view, never PyTorch's)
        out = out.clone(memory_format="contiguous_format" if fmt == "contiguous" else fmt)
    return out


def pixel_shuffle(input, upscale_factor):
    """As torch.nn.functional.pixel_shuffle: (*, C r^2, H, W) -> (*, C, H r, W r)."""
    _at_least_3d(input, "pixel_shuffle")
    r = int(upscale_factor)
    if r <= 0:
        raise RuntimeError(f"pixel_shuffle expects a positive upscale_factor, but got {r}")
    *batch, c, h, w = input.shape
    if c % (r * r):
        raise RuntimeError("pixel_shuffle expects its input's 'channel' dimension to be "
                           f"divisible by the square of upscale_factor, but input.size(-3)={c} "
                           f"is not divisible by {r * r}")
    b = len(batch)
    x = input.reshape(tuple(batch) + (c // (r * r), r, r, h, w))
    x = x.permute(list(range(b)) + [b, b + 3, b + 1, b + 4, b + 2])
    return rename(_in_format_of(x.reshape(tuple(batch) + (c // (r * r), h * r, w * r)), input,
                                True), "PixelShuffleBackward0")


def pixel_unshuffle(input, downscale_factor):
    """As torch.nn.functional.pixel_unshuffle: (*, C, H r, W r) -> (*, C r^2, H, W)."""
    _at_least_3d(input, "pixel_unshuffle")
    r = int(downscale_factor)
    if r <= 0:
        raise RuntimeError(f"pixel_unshuffle expects a positive downscale_factor, but got {r}")
    *batch, c, h, w = input.shape
    for what, n, d in (("height", h, -2), ("width", w, -1)):
        if n % r:
            raise RuntimeError(f"pixel_unshuffle expects {what} to be divisible by "
                               f"downscale_factor, but input.size({d})={n} is not divisible by "
                               f"{r}")
    b = len(batch)
    x = input.reshape(tuple(batch) + (c, h // r, r, w // r, r))
    x = x.permute(list(range(b)) + [b, b + 2, b + 4, b + 1, b + 3])
    return rename(_in_format_of(x.reshape(tuple(batch) + (c * r * r, h // r, w // r)), input,
                                True), "PixelUnshuffleBackward0")


def channel_shuffle(input, groups):
    """As torch.nn.functional.channel_shuffle: the channels (dim 1) of g groups
    interleaved."""
    shape = tuple(input.shape)
    if len(shape) <= 2:
        raise RuntimeError(f"channel_shuffle expects input with > 2 dims, but got input with "
                           f"sizes {list(shape)}")
    g = int(groups)
    if g <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value of "
                           f"groups:{g}")
    c = shape[1]
    if c % g:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {c} channels "
                           f"and {g} groups.")
    x = input.reshape((shape[0], g, c // g) + shape[2:]).transpose(1, 2)
    return rename(_in_format_of(x.reshape(shape), input), "ChannelShuffleBackward0", (input,))


def native_channel_shuffle(input, groups):
    """As torch.nn.functional.native_channel_shuffle: channel_shuffle's values, with no
    derivative (PyTorch's NotImplemented node: a backward through it raises)."""
    return no_derivative(channel_shuffle(input, groups), "native_channel_shuffle")


def bilinear(input1, input2, weight, bias=None):
    """As torch.nn.functional.bilinear: y_o = x1^T W_o x2 + b_o over the batch dims."""
    named = [("input1", input1), ("input2", input2), ("weight", weight)] + (
        [("bias", bias)] if bias is not None else [])
    if len({t.dtype for _, t in named}) > 1:
        raise RuntimeError("All tensors must have the same dtype, got " + ", ".join(
            f"{n}: {C_NAMES[t.dtype.name]}" for n, t in named))
    a, b = input1.dim(), input2.dim()
    if a != b:
        raise RuntimeError(f"bilinear(): input dimensions do not match: got {a} and {b}")
    for i in range(a - 1):
        if input1.shape[i] != input2.shape[i]:
            raise RuntimeError(f"bilinear(): input batch dimensions do not match at dim {i}: "
                               f"got {input1.shape[i]} and {input2.shape[i]}")
    o, i1, i2 = weight.shape
    for k, (x, n) in enumerate(((input1, i1), (input2, i2)), 1):
        if x.shape[-1] != n:
            raise RuntimeError(f"bilinear(): input{k} size does not match weight size: got "
                               f"{x.shape[-1]} but expected {n}")
    if bias is not None and bias.shape[-1] != o:
        raise RuntimeError(f"bilinear(): bias size does not match weight size: got "
                           f"{bias.shape[-1]} but expected {o}")
    t = input1.matmul(weight.permute(1, 0, 2).reshape(i1, o * i2))
    lead = tuple(input1.shape[:-1])
    # (PyTorch's result is a view of its _trilinear's: ViewBackward0)
    # dtype=: an integer sum would promote to int64; PyTorch keeps the inputs' dtype
    y = (t.reshape(lead + (o, i2)) * input2.unsqueeze(-2)).sum(-1, dtype=input1.dtype) \
        .view(lead + (o,))
    return y if bias is None else y + bias


def relu_(input):
    """As torch.nn.functional.relu_."""
    return input.relu_()


def elu_(input, alpha=1.0):
    """As torch.nn.functional.elu_."""
    return _act.elu(input, alpha, inplace=True)


def selu_(input):
    """As torch.nn.functional.selu_."""
    return _act.selu(input, inplace=True)


def celu_(input, alpha=1.0):
    """As torch.nn.functional.celu_."""
    return _act.celu(input, alpha, inplace=True)


def hardtanh_(input, min_val=-1.0, max_val=1.0):
    """As torch.nn.functional.hardtanh_ (which, unlike F.hardtanh, takes min_val > max_val:
    every element becomes max_val)."""
    return _act._apply("hardtanh", input, True, {"min_val": min_val, "max_val": max_val})


def threshold_(input, threshold, value):
    """As torch.nn.functional.threshold_."""
    return _act.threshold(input, threshold, value, inplace=True)


def leaky_relu_(input, negative_slope=0.01):
    """As torch.nn.functional.leaky_relu_."""
    _act.floating_only(input, "leaky_relu_cpu")
    return input._iop("leaky_relu_", negative_slope=negative_slope)
