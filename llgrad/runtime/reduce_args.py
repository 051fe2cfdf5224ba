"""The dim and keepdim of a reduction as PyTorch's argument parser takes them."""


class _NoDim:
    """The default of a reduction's dim: PyTorch's overloads without a dim take no keepdim
    (x.sum(keepdim=True) is a TypeError, x.sum(None, keepdim=True) is not)."""

    def __repr__(self):
        return "None"


NO_DIM = _NoDim()


def dim_given(name, dim, keepdim, none_ok=True):
    """dim as None when not given, or PyTorch's TypeError: keepdim without a dim, or (for
    prod / max / median, whose dim is an int) a dim of None."""
    if dim is NO_DIM and keepdim is None:
        return None
    if dim is NO_DIM:
        raise TypeError(f"{name}() received an invalid combination of arguments - got "
                        "(keepdim=bool, ), but expected one of:")
    if dim is None and not none_ok:
        raise TypeError(f"{name}(): argument 'dim' must be int, not NoneType")
    return dim


def lse_dims(shape, dim, keepdim):
    """PyTorch's error for logsumexp over dim=() of a non-empty tensor of 1 or more dims:
    its max, kept (1, ..., 1), is squeezed over no dims, then added in place to the sum
    over every dim, () (keepdim=True agrees, and an empty tensor takes another path)."""
    if isinstance(dim, (tuple, list)) and not dim and not keepdim and shape and all(shape):
        raise RuntimeError(f"output with shape [] doesn't match the broadcast shape "
                           f"[{', '.join('1' * len(shape))}]")
