"""foreach_map(op, *operands): op applied across lists of operands, as
torch._higher_order_ops.foreach_map runs eagerly (llgrad.compile traces it op by op)."""


def foreach_map(op, *operands, **kwargs):
    """[op(*elements, **kwargs) for the i-th element of every list operand], a non-list
    operand given to every call; op(*operands, **kwargs) when no operand is a list."""
    if not any(isinstance(a, (list, tuple)) for a in operands):
        return op(*operands, **kwargs)
    n = min(len(a) for a in operands if isinstance(a, (list, tuple)))
    columns = [a if isinstance(a, (list, tuple)) else [a] * n for a in operands]
    return [op(*args, **kwargs) for args in zip(*columns)]
