"""vmap of the functions llgrad evaluates with NumPy outside the op table
(runtime/vmap_fallback.py's `per_sample`): the function once per sample of the innermost
level among its batched arguments (an argument batched at outer levels stays batched, so
nested vmaps peel one level per call), the results stacked into that level. Slicing and
stacking are ordinary ops, so autograd flows through them."""
import warnings

from ..runtime import vmap_fallback
from ..runtime.functions import stack
from ..runtime.tensor import Tensor
from ..runtime.user_frames import user_stacklevel
from .batched import BatchedTensor, align, sizes_of, unwrap, wrap


def _batched(x, acc):
    if type(x) is BatchedTensor:
        acc.append(x)
    elif isinstance(x, (list, tuple)):
        for v in x:
            _batched(v, acc)
    return acc


def _slice(x, level, b):
    if type(x) is BatchedTensor:
        phys, levels = unwrap(x)
        if level in levels:
            i = levels.index(level)
            return wrap(phys.select(i, b), levels[:i] + levels[i + 1:])
        return x
    if isinstance(x, (list, tuple)) and not hasattr(x, "_fields"):
        return type(x)(_slice(v, level, b) for v in x)
    return x


def _stack(outs, level, fn):
    first = outs[0]
    if isinstance(first, Tensor):
        sizes = {}
        for o in outs:
            sizes.update(sizes_of(o))
        levels = tuple(sorted(sizes))
        shapes = {tuple(o.shape) for o in outs}
        if len(shapes) > 1:
            raise RuntimeError(f"vmap: {fn.__name__} gives results of different shapes for "
                               f"different samples ({sorted(shapes)}): a data-dependent "
                               "shape cannot be batched")
        phys = [align(o, levels, tuple(sizes[lv] for lv in levels)) for o in outs]
        new = tuple(sorted(levels + (level,)))
        return wrap(stack(phys, new.index(level)), new)
    if isinstance(first, (list, tuple)):
        cols = [_stack(list(c), level, fn) for c in zip(*outs)]
        return type(first)(*cols) if hasattr(first, "_fields") else type(first)(cols)
    if any(o != first for o in outs):
        raise RuntimeError(f"vmap: {fn.__name__} returns a {type(first).__name__} that differs "
                           "between samples, which cannot be batched")
    return first


def loop(fn, args, kwargs, inplace=False):
    """fn(*args, **kwargs) sample by sample over the innermost level of its batched
    arguments (NotImplemented when none is batched). In place, each sample writes into its
    slice of args[0] (a view), which must be batched at that level, as PyTorch requires."""
    found = _batched(list(args) + list(kwargs.values()), [])
    if not found:
        return NotImplemented
    level = max(lv for x in found for lv in x._levels)
    size = next(sizes_of(x)[level] for x in found if level in x._levels)
    if inplace and not (type(args[0]) is BatchedTensor and level in args[0]._levels):
        raise RuntimeError(f"vmap: {fn.__name__}(self, *extra_args) is not possible because "
                           "there exists a Tensor `other` in extra_args that has more elements "
                           "than `self`. This happened due to `other` being vmapped over but "
                           "`self` not being vmapped over in a vmap. Please try to use "
                           f"out-of-place operators instead of {fn.__name__}.")
    if size == 0:
        raise RuntimeError(f"vmap: {fn.__name__} over a batch of size 0 cannot be batched")
    # (PyTorch's words where its vmap falls back to a loop, at the user's line)
    warnings.warn("There is a performance drop because we have not yet implemented the "
                  f"batching rule for aten::{fn.__name__}. Please file us an issue on GitHub "
                  "so that we can prioritize its implementation.", UserWarning,
                  stacklevel=user_stacklevel())
    outs = [fn(*_slice(list(args), level, b),
               **{k: _slice(v, level, b) for k, v in kwargs.items()}) for b in range(size)]
    return args[0] if inplace else _stack(outs, level, fn)


vmap_fallback.loop = loop
