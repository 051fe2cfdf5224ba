"""The layout `empty_like(x)` gives in PyTorch (memory_format=torch.preserve_format): x's
own strides when x is dense, else dense strides in x's dimension order (ATen's
infer_dense_strides). Random `*_like` draws and dropout masks fill such a buffer in memory
order, so drawing them row-major would give other numbers than PyTorch's for a transposed
x (nn.MultiheadAttention's batch_first output, a permuted feature map)."""
from ..ir.geometry import fast_to_slow


def in_layout_of(x, make):
    """make(shape) -> a contiguous tensor; the same values laid out as empty_like(x), filled
    in memory order: make's row-major order is that buffer's memory order."""
    shape = tuple(x.shape)
    if x.is_contiguous():
        return make(shape)
    order = fast_to_slow(shape, x.stride())[::-1]            # (slowest first)
    drawn = make(tuple(shape[d] for d in order))
    inverse = [0] * len(order)
    for i, d in enumerate(order):
        inverse[d] = i
    return drawn.permute(inverse)


def like_layout(x, make, memory_format=None):
    """make(shape) laid out as x's `*_like` result with memory_format (preserve_format, the
    default: x's layout; contiguous_format: row-major). Not a view of make's tensor: a fresh
    tensor as PyTorch's, a leaf (its base is internal)."""
    if memory_format == "contiguous_format" or x.is_contiguous():
        return make(tuple(x.shape))
    out = in_layout_of(x, make)
    out._base = None            # (the permuted buffer is the result's own, as in reshape's
    out._creation = None        # copy: no view of it escapes)
    return out
