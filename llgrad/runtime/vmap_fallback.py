"""Functions that read their tensors' values with NumPy outside the op table (i0, frexp,
igamma, histc, take, masked_scatter, ...) under llgrad.func.vmap: decorated with
`per_sample`, a call with a batched tensor among its arguments runs once per sample on
ordinary tensors and the results are stacked (llgrad/func/per_sample.py does it), as
PyTorch's vmap batches them. Without a vmap running the cost is one attribute read. A meta
tensor among the arguments goes to meta_values.py (`values_read` marks the functions that
read values but are not batched sample by sample; `meta_on_mismatch` the composites whose own
CPU constants meet a meta tensor)."""
import functools

from . import trace_state

# llgrad.func sets it: loop(fn, args, kwargs, inplace) -> fn's batched result, or
# NotImplemented when no argument is batched
loop = None
# meta_values.call, put in with the first meta tensor (meta_tensor.py): meta(fn, args, kwargs,
# inplace) -> fn's meta result, or NotImplemented when no argument is a meta tensor
meta = None


def per_sample(fn, inplace=False):
    """fn, run sample by sample when an argument is a batched tensor of llgrad.func.vmap
    (inplace: fn writes into its first argument, each sample into its own slice)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if trace_state.state.vmap_levels and loop is not None:
            res = loop(wrapper, args, kwargs, inplace)
            if res is not NotImplemented:
                return res
        if meta is not None and (res := meta(fn, args, kwargs, inplace)) is not NotImplemented:
            return res
        return fn(*args, **kwargs)
    return wrapper


def values_read(fn):
    """fn, which reads its tensors' values with NumPy, given a meta tensor: meta_values.py."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if meta is not None and (res := meta(fn, args, kwargs, False)) is not NotImplemented:
            return res
        return fn(*args, **kwargs)
    return wrapper


def per_sample_inplace(fn):
    """per_sample of an in-place fn (it returns its first argument)."""
    return per_sample(fn, True)


def meta_on_mismatch(fn):
    """fn, a composite of ops with CPU constants of its own (masks, positions, weights):
    where one meets a meta tensor (PyTorch's device error), fn's meta results come from
    meta_values.py instead. The CPU path pays for a try block only."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except RuntimeError as e:
            if meta is None or "is not on the expected device" not in str(e):
                raise
            res = meta(fn, args, kwargs, False)
            if res is NotImplemented:
                raise
        return res
    return wrapper
