"""F.pad, as PyTorch's pad dispatches it: constant padding is constant_pad_nd (any number
of padded dims, negative pads crop), reflect and replicate are ops of their own for 1, 2
or 3 padded dims (llgrad/ir/ops_nn_more.py), and circular is PyTorch's composition: the
input copied into a new tensor, whose borders are then copied from its other side
(CopySlices, as in PyTorch)."""
import operator

import numpy as np

from ..ir import OPS
from ..runtime.autocast_cast import autocast_float32
from ..runtime.creation_checks import fill_value_fits
from ..runtime.dispatch import call
from ..runtime.result_format import in_suggested_format

_MODES = ("constant", "reflect", "replicate", "circular")


def _unsupported(pad, nd):
    return NotImplementedError(
        f"Padding size {len(pad)} is not supported for {nd}D input tensor.\n"
        "Supported combinations for non-constant padding:\n"
        "  - 2D or 3D input: padding size = 2 (pads last dimension)\n"
        "  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n"
        "  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)")


def _check_index_pad(input, pad, mode):
    shape, k = list(input.shape), len(pad) // 2
    nd = len(shape)
    if not k <= nd - 1 <= k + 1:
        raise _unsupported(pad, nd)
    lead = shape[:nd - k]
    if any(n == 0 for n in shape[1:]) or (len(lead) == 1 and lead[0] == 0):
        raise RuntimeError(f"Expected {k + 1}D or {k + 2}D (batch mode) tensor with possibly 0 "
                           "batch size and other non-zero dimensions for input, but got: "
                           f"{shape}")
    names = ("W", "H", "D")
    for i in range(k):
        d = nd - 1 - i
        lo, hi = pad[2 * i], pad[2 * i + 1]
        if mode == "reflect" and (lo >= shape[d] or hi >= shape[d]):
            raise RuntimeError(f"Argument #{4 + 2 * i}: Padding size should be less than the "
                               "corresponding input dimension, but got: padding "
                               f"({lo}, {hi}) at dimension {d} of input {shape}")
        if shape[d] + lo + hi < 1:
            raise RuntimeError(f"input ({names[i]}: {shape[d]}) is too small. Calculated output "
                               f"{names[i]}: {shape[d] + lo + hi}")


def _circular(input, pad):
    shape, k = list(input.shape), len(pad) // 2
    nd = len(shape)
    if nd - k not in (1, 2):
        raise RuntimeError("Invalid padding size, expected 1 or 2 non-padded dimensions, which "
                           f"would be equivalent to padding of length {(nd - 1) * 2} or "
                           f"{(nd - 2) * 2} respectively but got {len(pad)}")
    out_shape = list(shape)
    for i in range(k):
        d, lo, hi = nd - 1 - i, pad[2 * i], pad[2 * i + 1]
        if lo > shape[d] or hi > shape[d]:
            raise RuntimeError("Padding value causes wrapping around more than once.")
        out_shape[d] = shape[d] + lo + hi
        if out_shape[d] < 0:
            raise RuntimeError("Negative padding value is resulting in an empty dimension")
    out = input.new_empty(out_shape)
    out_slice, in_slice = out, input
    for i in range(k):
        d, lo, hi = nd - 1 - i, pad[2 * i], pad[2 * i + 1]
        out_slice = out_slice.narrow(d, max(lo, 0), out_shape[d] - max(lo, 0) - max(hi, 0))
        in_slice = in_slice.narrow(d, max(-lo, 0), shape[d] - max(-lo, 0) - max(-hi, 0))
    out_slice.copy_(in_slice)
    for i in range(k):         # the borders, from the other side (corners written twice)
        d, lo, hi = nd - 1 - i, pad[2 * i], pad[2 * i + 1]
        if lo > 0:
            out.narrow(d, 0, lo).copy_(out.narrow(d, out_shape[d] - lo - max(hi, 0), lo))
        if hi > 0:
            out.narrow(d, out_shape[d] - hi, hi).copy_(out.narrow(d, max(lo, 0), hi))
    return out


def _int_pads(pad):
    """pad as a tuple of ints; a float or a bool refused as PyTorch's argument parser does
    (int() would truncate a 1.5 to a 1 silently)."""
    out = []
    for i, p in enumerate(pad):
        try:
            if isinstance(p, (bool, np.bool_)):
                raise TypeError
            out.append(operator.index(p))
        except TypeError:
            t = type(p)
            name = t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__name__}"
            if i == 0:
                raise TypeError("pad(): argument 'pad' (position 2) must be tuple of ints, but "
                                f"found element of type {name} at pos 0") from None
            raise TypeError("pad(): argument 'pad' failed to unpack the object at pos 2 with "
                            f'error "type must be tuple of ints,but got {name}"') from None
    return tuple(out)


def pad(input, pad, mode="constant", value=None):
    """As torch.nn.functional.pad (modes constant, reflect, replicate, circular)."""
    pad = _int_pads(pad)
    if mode not in _MODES:
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    nd = input.dim()
    if len(pad) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    if len(pad) > 2 * nd:
        raise RuntimeError("Padding length should be less than or equal to two times the input "
                           f"dimension but got padding length {len(pad)} and input of "
                           f"dimension {nd}")
    if mode == "constant":
        for d, lo, hi in ((nd - 1 - i, pad[2 * i], pad[2 * i + 1]) for i in range(len(pad) // 2)):
            if input.shape[d] + min(lo, 0) + min(hi, 0) < 0 or input.shape[d] + lo + hi < 0:
                raise RuntimeError(f"The input size {input.shape[d]}, plus negative padding "
                                   f"{lo} and {hi} resulted in a negative output size, which is "
                                   f"invalid. Check dimension {d} of your input.")
        if type(value) in (bool, int, float):   # (PyTorch's value is a float, stored with
            value = fill_value_fits(float(value), input.dtype)  # its overflow check)
        return in_suggested_format(call(OPS["constant_pad_nd"], (input,), {
            "pad": pad, "value": 0.0 if value is None else value}), input)
    if value is not None and value != 0:
        raise RuntimeError(f'Padding mode "{mode}" doesn\'t take in value argument')
    if len(pad) not in (2, 4, 6) or not len(pad) // 2 <= nd - 1 <= len(pad) // 2 + 1:
        raise _unsupported(pad, nd)
    if mode == "circular":
        return _circular(input, pad)
    _check_index_pad(input, pad, mode)
    if input.dtype.name == "bool":      # (ATen's CPU kernels have no bool version)
        raise NotImplementedError(f'"{"reflection" if mode == "reflect" else "replication"}_pad'
                                  f"{len(pad) // 2}d\" not implemented for 'Bool'")
    if mode == "replicate" or len(pad) < 6:     # (on CPU autocast's float32 list, as
        input, = autocast_float32(input)        # PyTorch's but reflection_pad3d)
    return in_suggested_format(call(OPS["reflection_pad" if mode == "reflect" else
                                         "replication_pad"], (input,), {"pad": pad}), input)
