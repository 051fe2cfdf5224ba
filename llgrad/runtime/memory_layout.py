"""The layout `empty_like(x)` gives in PyTorch (memory_format=torch.preserve_format): x's
own strides when x is dense, else dense strides in x's dimension order (ATen's
infer_dense_strides). Random `*_like` draws and dropout masks fill such a buffer in memory
order, so drawing them row-major would give other numbers than PyTorch's for a transposed
x (nn.MultiheadAttention's batch_first output, a permuted feature map)."""


def fast_to_slow(shape, strides):
    """Dimensions from fastest to slowest varying, as infer_dense_strides orders them (an
    insertion sort; a stride-0 dimension is ambiguous and keeps its place; equal strides
    put the smaller size first)."""
    def should_swap(d0, d1):
        s0, s1 = strides[d0], strides[d1]
        if s0 == 0 or s1 == 0:
            return 0
        if s0 != s1:
            return -1 if s0 < s1 else 1
        return 1 if shape[d0] > shape[d1] else 0

    perm = list(range(len(shape)))[::-1]
    for i in range(1, len(perm)):
        d1 = i
        for d0 in range(i - 1, -1, -1):
            cmp = should_swap(perm[d0], perm[d1])
            if cmp > 0:
                perm[d0], perm[d1] = perm[d1], perm[d0]
                d1 = d0
            elif cmp < 0:
                break
    return perm


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
