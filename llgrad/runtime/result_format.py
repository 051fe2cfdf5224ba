"""The memory format of the CNN ops' results: channels_last where an operand suggests it,
as ATen's CPU convolution, batch norm, group norm, pooling, padding and cat kernels allocate
their results."""
from .memory_formats import channels_contiguous, suggested
from .node import node_class

_RANK = {"channels_last": 4, "channels_last_3d": 5}


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
