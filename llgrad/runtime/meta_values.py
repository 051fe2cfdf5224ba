"""Meta tensors given to the functions that read their tensors' values with NumPy outside
the op table (vmap_fallback.per_sample's and values_read's: frexp, igamma, histc,
searchsorted, poisson, ...). Their NumPy code would compute on a meta tensor's zero mapping
and return CPU tensors of made-up values; instead they give PyTorch's error where PyTorch
has no meta kernel, else meta results of the shapes and dtypes the function gives on zeros
(these results' shapes do not depend on the values), with autograd history reaching the
meta inputs that require grad, and no draw taken from the generator."""
from ..ir import OPS
from . import grad_mode, random_state
from . import meta_tensor as meta_tensor_module
from .inplace import call_inplace
from .meta_dispatch import no_meta_kernel, nonzero_error
from .meta_factories import meta_stand_in, to_meta
from .meta_tensor import MetaStorage, no_data_error
from .tensor import Tensor

# what PyTorch has no meta kernel for: the aten operator its error names
_NO_KERNEL = {"histogram": "histogram.bin_ct", "histogramdd": "_histogramdd_bin_edges",
              "binomial": "binomial"}
# repeat_interleave's index helpers: the result's length is the repeats' sum
_REPEATS = ("_repeated_positions", "_repeat_indices")


def _is_meta(x):
    return isinstance(x, Tensor) and x._storage.__class__ is MetaStorage


def _cpu(x):
    if _is_meta(x):
        return meta_stand_in(x)
    if isinstance(x, (list, tuple)) and any(_is_meta(v) for v in x):
        return type(x)(_cpu(v) for v in x)
    return x


def _metas(args, kwargs):
    for x in (*args, *kwargs.values()):
        if _is_meta(x):
            yield x
        elif isinstance(x, (list, tuple)):
            yield from (v for v in x if _is_meta(v))


def _on_meta(t, link):
    r = to_meta(t, requires_grad=False)
    return r + link if link is not None and r._dtype.is_floating_point else r


def call(fn, args, kwargs, inplace):
    """fn(*args, **kwargs) with a meta tensor among the arguments (NotImplemented when there
    is none): PyTorch's error, or fn's results as meta tensors."""
    metas = list(_metas(args, kwargs))
    name = fn.__name__
    if not metas:
        return NotImplemented
    if name in _REPEATS:
        raise RuntimeError("cannot repeat_interleave a meta tensor without output_size")
    if name in _NO_KERNEL:
        raise no_meta_kernel(_NO_KERNEL[name])
    if name in ("nonzero", "argwhere"):
        raise nonzero_error()
    if inplace:
        if not _is_meta(args[0]):
            raise no_data_error()
        # (the version, the leaf check and the history of a write into args[0])
        return call_inplace(OPS["fill"], args[0], (args[0], 0), {})
    gen = random_state.default_generator
    kept = None if gen._state is None else gen._state.copy()
    try:
        with grad_mode.no_grad():
            out = fn(*[_cpu(x) for x in args], **{k: _cpu(v) for k, v in kwargs.items()})
    finally:            # (no draw is taken on the meta device)
        if kept is None or gen._state is None:
            gen._state = kept
        else:
            gen._state[...] = kept
    link = None
    if grad_mode.state.grad_enabled:
        grads = [x.sum() * 0 for x in metas if x.requires_grad]
        link = sum(grads[1:], grads[0]) if grads else None
    if isinstance(out, Tensor):
        return _on_meta(out, link)
    items = [_on_meta(t, link) if isinstance(t, Tensor) else t for t in out]
    return type(out)(*items) if hasattr(out, "_fields") else type(out)(items)


meta_tensor_module.values_hook = call    # (put in with the first meta tensor)
