"""The memory format of the CNN ops' results: channels_last where an operand suggests it,
as ATen's CPU convolution, batch norm, group norm, pooling, padding and cat kernels allocate
their results."""
import threading

from ..ir.optable import kept
from .memory_formats import channels_contiguous, suggested
from .node import node_class

_RANK = {"channels_last": 4, "channels_last_3d": 5}
# .on is True while formatted() runs its call (in that thread): a convolution or batch norm of
# a channels_last input may give its result channels_last itself (compile/eager_channels_last.py)
allowed = threading.local()


def formatted(call, *operands):
    """in_suggested_format(call(), *operands), call's convolution or batch norm allowed to
    lay its result out channels_last itself where its input is (the layout
    in_suggested_format would copy it to), without the NCHW result and its copy."""
    prev = getattr(allowed, "on", False)
    allowed.on = True
    try:
        out = call()
    finally:
        allowed.on = prev
        kept[0] = None      # (a result c_order was to keep that it never met: not kept later)
    return in_suggested_format(out, *operands)


def in_suggested_format(out, *operands, every=False):
    """out laid out channels_last where one of operands (an input, a weight; every=True:
    each of them, as cat's) suggests that format; its grad_fn keeps out's node name (the
    layout copy is not a node of torch's)."""
    formats = set(map(suggested, operands))
    fmt = next((f for f in formats if f != "contiguous"), "contiguous")
    if every and len(formats) != 1:
        return out
    if fmt == "contiguous" or out.dim() != _RANK[fmt] or \
            channels_contiguous(tuple(out.shape), out.stride(), fmt):
        return out
    made = out.contiguous(memory_format=fmt)
    if out._grad_fn is not None and made._grad_fn is not None:
        made._grad_fn.__class__ = node_class(type(out._grad_fn).__name__)
    return made
