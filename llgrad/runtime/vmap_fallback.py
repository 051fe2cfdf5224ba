"""Functions that read their tensors' values with NumPy outside the op table (i0, frexp,
igamma, histc, take, masked_scatter, ...) under llgrad.func.vmap: decorated with
`per_sample`, a call with a batched tensor among its arguments runs once per sample on
ordinary tensors and the results are stacked (llgrad/func/per_sample.py does it), as
PyTorch's vmap batches them. Without a vmap running the cost is one attribute read."""
import functools

from . import trace_state

# llgrad.func sets it: loop(fn, args, kwargs, inplace) -> fn's batched result, or
# NotImplemented when no argument is batched
loop = None


def per_sample(fn, inplace=False):
    """fn, run sample by sample when an argument is a batched tensor of llgrad.func.vmap
    (inplace: fn writes into its first argument, each sample into its own slice)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if trace_state.state.vmap_levels and loop is not None:
            res = loop(wrapper, args, kwargs, inplace)
            if res is not NotImplemented:
                return res
        return fn(*args, **kwargs)
    return wrapper


def per_sample_inplace(fn):
    """per_sample of an in-place fn (it returns its first argument)."""
    return per_sample(fn, True)
