"""out= of the functions that handle it themselves (their own out parameter): the result
written into out, which takes the result's shape first when it has another (PyTorch resizes
an empty out; one with elements too, with a warning out_args.py gives for the others)."""
from .dtypes import C_NAMES


def into(out, r):
    """r, or r written into out (a tuple of outs for a tuple of results) and out returned."""
    if out is None:
        return r
    if isinstance(r, tuple):    # (every out's dtype checked before any is written)
        for o, v in zip(out, r):
            if o.dtype is not v.dtype:
                raise RuntimeError(f"Expected out tensor to have dtype {C_NAMES[v.dtype.name]}, "
                                   f"but got {C_NAMES[o.dtype.name]} instead")
    for o, v in zip(out, r) if isinstance(r, tuple) else ((out, r),):
        if tuple(o.shape) != tuple(v.shape):
            o.resize_(v.shape)
        o.copy_(v)
    return out
