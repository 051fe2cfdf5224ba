"""Shape functions PyTorch has and llgrad writes as compositions of views, cat, index_select
and the positional ops: movedim / moveaxis / swapdims, ravel, atleast_1d/2d/3d, hstack /
vstack / dstack / column_stack / row_stack, tensor_split / hsplit / vsplit / dsplit /
split_with_sizes, tile (llgrad.* and Tensor methods; functions_rearrange.py has those that
rearrange elements: diff, rot90, kron, take, ...)."""
import itertools
import numbers

import numpy as np

from . import dtypes
from .dispatch import scalar_type_name as tname
from .functions import _tensors, cat, export
from .functions_math import attach
from .shapes import norm_dim, norm_slice
from .tensor import Tensor


def _int_list(x):
    return [int(x)] if isinstance(x, (int, np.integer)) else [int(v) for v in x]


def movedim(input, source, destination):
    """As torch.movedim: dims source moved to positions destination (a view)."""
    nd = input._data.ndim
    src, dst = _int_list(source), _int_list(destination)
    if len(src) != len(dst):
        raise RuntimeError(f"movedim: Invalid source or destination dims: source ({src} dims) "
                           f"should contain the same number of dims as destination ({dst} "
                           "dims)")
    src = [norm_dim(d, nd) for d in src]
    dst = [norm_dim(d, nd) for d in dst]
    for what, ds in (("source", src), ("destination", dst)):
        if len(set(ds)) != len(ds):
            raise RuntimeError(f"movedim: repeated dim in `{what}` ({ds})")
    if nd == 0:
        return input.permute(())
    order = [-1] * nd
    for s, d in zip(src, dst):
        order[d] = s
    rest = iter(j for j in range(nd) if j not in src)
    return input.permute([o if o != -1 else next(rest) for o in order])


def swapdims(input, dim0, dim1):
    """As torch.swapdims (torch.transpose)."""
    return input.transpose(dim0, dim1)


def ravel(input):
    """As torch.ravel: contiguous().view(-1), as PyTorch's (a view of a copy if need be)."""
    return input.contiguous().view(-1)


# ---- at least n dims, stacking ------------------------------------------------------------------

def _atleast(n, t):
    nd = t._data.ndim
    if nd >= n:
        return t
    if nd == 0:
        return t.reshape((1,) * n)
    if n == 2 or nd == 2:          # (k,) -> (1, k) for 2-d; (m, k) -> (m, k, 1) for 3-d
        return t.unsqueeze(0) if n == 2 else t.unsqueeze(-1)
    return t.unsqueeze(0).unsqueeze(-1)     # (k,) -> (1, k, 1)


def _atleast_fn(n):
    def fn(*tensors):
        if len(tensors) == 1 and isinstance(tensors[0], Tensor):
            return _atleast(n, tensors[0])
        seq = tensors[0] if len(tensors) == 1 else tensors
        return tuple(_atleast(n, t) for t in seq)
    fn.__name__ = fn.__qualname__ = f"atleast_{n}d"
    fn.__doc__ = (f"As torch.atleast_{n}d: a tensor with fewer than {n} dims as a view with "
                  "{n}; several tensors (or one sequence) give a tuple.").replace("{n}", str(n))
    return fn


atleast_1d, atleast_2d, atleast_3d = _atleast_fn(1), _atleast_fn(2), _atleast_fn(3)


def _nonempty(tensors, name):
    seq = list(tensors) if isinstance(tensors, (list, tuple)) else _tensors(tensors, name)
    if not seq:
        raise RuntimeError(f"{name} expects a non-empty TensorList")
    return seq


def hstack(tensors):
    """As torch.hstack: cat along dim 1 (dim 0 for 1-D tensors)."""
    ts = [_atleast(1, t) for t in _nonempty(tensors, "hstack")]
    return cat(ts, 0 if ts[0]._data.ndim == 1 else 1)


def vstack(tensors):
    """As torch.vstack: cat along dim 0 of the tensors made at least 2-D."""
    return cat([_atleast(2, t) for t in _nonempty(tensors, "vstack")], 0)


def dstack(tensors):
    """As torch.dstack: cat along dim 2 of the tensors made at least 3-D."""
    return cat([_atleast(3, t) for t in _nonempty(tensors, "dstack")], 2)


def column_stack(tensors):
    """As torch.column_stack: 0-D and 1-D tensors as columns, then cat along dim 1."""
    ts = _nonempty(tensors, "column_stack")
    return cat([t.reshape(t._data.size, 1) if t._data.ndim <= 1 else t for t in ts], 1)


def concatenate(tensors, axis=0, *, dim=None):
    """As torch.concatenate (torch.cat with NumPy's argument name)."""
    return cat(tensors, axis if dim is None else dim)


# ---- splitting ----------------------------------------------------------------------------------

def _overload(name, given, named, names):
    """The one of PyTorch's overloads' names for the same argument (tensor_split(x,
    sections=2), x.hsplit(indices=[1])): given by position or by one of names."""
    bad = [k for k in named if k not in names]
    if bad or len(named) + (given is not None) != 1:
        why = f"got an unexpected keyword argument '{bad[0]}'" if bad else \
            f"takes one of {', '.join(names)}"
        raise TypeError(f"{name}() {why}")
    return given if given is not None else next(iter(named.values()))


def tensor_split(input, indices_or_sections=None, dim=0, **named):
    """As torch.tensor_split: views of input split into n nearly equal sections (an int) or
    at the given indices (a sequence, or a tensor of them) along dim."""
    indices_or_sections = _overload("tensor_split", indices_or_sections, named,
                                    ("sections", "indices", "tensor_indices_or_sections"))
    nd = input._data.ndim
    if nd == 0:
        raise RuntimeError("tensor_split expected at least a 1-dimensional tensor, but got a "
                           "tensor with 0 dims")
    ios = indices_or_sections
    if isinstance(ios, Tensor):
        if ios._dtype is not dtypes.int64:
            raise RuntimeError("tensor_split expected tensor_indices_or_sections to have dtype "
                               f"of long, but got {tname(ios._dtype)}")
        if ios._data.ndim > 1:
            raise RuntimeError("tensor_split expected tensor_indices_or_sections to be a "
                               "zero-dimensional or one-dimensional tensor, but got a tensor "
                               f"with {ios._data.ndim} dims")
        ios = int(ios.item()) if ios._data.ndim == 0 else [int(v) for v in ios.tolist()]
    d = norm_dim(dim, nd)
    n = input._data.shape[d]
    if isinstance(ios, numbers.Integral):      # (an int, NumPy's, a size a trace read)
        if ios <= 0:
            raise RuntimeError(f"number of sections must be larger than 0, got {ios}")
        q, r = divmod(n, int(ios))
        bounds = list(itertools.accumulate([q + 1] * r + [q] * (int(ios) - r), initial=0))
        pairs = list(zip(bounds[:-1], bounds[1:]))
    else:
        cuts = [0] + [int(i) for i in ios]
        pairs = [norm_slice(slice(a, b), n)[:2] for a, b in zip(cuts, cuts[1:] + [n])]
    return tuple(input.narrow(d, a, b - a) for a, b in pairs)


def _split_along(input, ios, name, min_nd, dim, named):
    ios = _overload(name, ios, named, ("sections", "indices"))
    nd = input._data.ndim
    if nd < min_nd:
        raise RuntimeError(f"torch.{name} requires a tensor with at least {min_nd} dimension, "
                           f"but got a tensor with {nd} dimensions!")
    if isinstance(ios, (int, np.integer)) and (not ios or input._data.shape[dim] % ios):
        raise RuntimeError(f"torch.{name} attempted to split along dimension {dim}, but the "
                           f"size of the dimension {input._data.shape[dim]} is not divisible by "
                           f"the split_size {ios}!")
    return tensor_split(input, ios, dim)


def hsplit(input, indices_or_sections=None, **named):
    """As torch.hsplit: tensor_split along dim 1 (dim 0 of a 1-D tensor); sections must
    divide the dim."""
    return _split_along(input, indices_or_sections, "hsplit", 1,
                        1 if input._data.ndim > 1 else 0, named)


def vsplit(input, indices_or_sections=None, **named):
    """As torch.vsplit: tensor_split along dim 0 of a tensor of at least 2 dims."""
    return _split_along(input, indices_or_sections, "vsplit", 2, 0, named)


def dsplit(input, indices_or_sections=None, **named):
    """As torch.dsplit: tensor_split along dim 2 of a tensor of at least 3 dims."""
    return _split_along(input, indices_or_sections, "dsplit", 3, 2, named)


def split_with_sizes(input, split_sizes, dim=0):
    """As torch.split_with_sizes: views of the given sizes along dim."""
    sizes = [int(s) for s in split_sizes]
    d = norm_dim(dim, input._data.ndim)
    n = input._data.shape[d] if input._data.ndim else 1
    if sum(sizes) != n:
        raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {n} (input "
                           f"tensor's size at dimension {d}), but got split_sizes={sizes}")
    return tuple(input.split(sizes, d))


def tile(input, dims):
    """As torch.tile: repeat, with dims padded by leading ones to input's number of dims."""
    dims = tuple(_int_list(dims))
    nd = input._data.ndim
    return input.repeat((1,) * (nd - len(dims)) + dims)


for _f in (swapdims, ravel, tensor_split, hsplit, vsplit, dsplit, split_with_sizes, tile):
    attach(_f)
attach(movedim, "moveaxis")
for _f in (atleast_1d, atleast_2d, atleast_3d, hstack, vstack, dstack, column_stack,
           concatenate):
    export(_f)
export(vstack, "row_stack")
del _f
