"""The dtype a reduction or scan was asked for (sum, prod, cumsum, cumprod's dtype=): the
input cast to it before the op, the result cast to it after."""
from . import dtypes, grad_mode
from .dtypes import scalar_type_name


def cast_for(self, dtype):
    """self in the dtype a reduction or scan was asked for; PyTorch's error where that dtype
    has no gradient and self would give the result one (sum(dtype=int64) of a float x that
    requires grad: no silently detached result)."""
    if dtype is None:
        return self
    dt = dtypes.to_dtype(dtype)
    if dt._cat < 2 and grad_mode.state.grad_enabled and self.requires_grad:
        raise RuntimeError(f"Autograd not support dtype: {scalar_type_name(dt)}")
    return self.to(dt)


def result_as(r, dtype):
    """A reduction's result in the dtype asked for (an integer one too: sum of int8 with
    dtype=int8 is int8, without it int64)."""
    return r if dtype is None or r._dtype is dtypes.to_dtype(dtype) else r.to(dtype)
