"""Ops that move data between tensors by position or index: cat, stack, masked_fill, gather,
scatter_add, index_select and index_add (the views and strided-buffer ops are ops_shape's)."""
import numpy as np

from . import bitselect, np_at
from .optable import conj, defop
from .geometry import contiguous_strides
from .index_bounds import check_index_range


def _offsets(c, dim):
    return [c.shape(i)[dim] for i in range(c.ninputs)]


defop("cat", lambda *xs, dim: np.concatenate(xs, axis=dim), args=("*tensors",), promote="all",
      grad_fn="CatBackward0",
      vjp=lambda c, g: tuple(g.split(_offsets(c, c.dim), c.dim)), complex=True)
defop("stack", lambda *xs, dim: np.stack(xs, axis=dim), args=("*tensors",), promote="all",
      grad_fn="StackBackward0", vjp=lambda c, g: tuple(g.unbind(c.dim)), complex=True)


def _masked_fill(x, mask, value):
    return bitselect.where(mask, np.asarray(value, dtype=x.dtype), x)


defop("masked_fill", _masked_fill, args=("self", "mask", "value"), save=("mask",),
      nondiff=("mask",),
      grad_fn=lambda ins, at: "MaskedFillBackward1" if hasattr(ins[2], "_dtype")
      else "MaskedFillBackward0", kind="elementwise",
      vjp=lambda c, g: (g.masked_fill(c.mask, 0) if c.needs(0) else None, None,
                        g.where(c.mask, 0).sum() if c.needs(2) else None),
      functions=("masked_fill",), complex=True)


def zero_dim_as_one(fn):
    """fn(x, index, *rest, dim=) for a 0-dim x too, as PyTorch reads it: a 1-element dim 0
    (0-dim index and src likewise); the result in index's shape (gather) or x's."""
    def impl(x, index, *rest, dim, **kw):
        if x.ndim and (index.ndim or x.ndim > 1):
            return fn(x, index, *rest, dim=dim, **kw)
        rest = [r.reshape(1) if isinstance(r, np.ndarray) and not r.ndim else r for r in rest]
        out = fn(x.reshape(-1), index.reshape(-1) if not index.ndim else index, *rest, dim=0,
                 **kw)      # (a 1-d x with a 0-d index too: the index (and src) 1-d)
        return out.reshape(index.shape if fn is _gather else x.shape)
    return impl


def _flat_positions(shape, index, dim):
    """The positions in a C-contiguous array of `shape`, flattened, of the elements index
    points at along dim (index of x's ndim, sizes <= shape's; checked in range)."""
    strides = contiguous_strides(shape)
    index = index.astype(np.int64, copy=False)      # (an int32 one would wrap)
    base = 0
    for d, n in enumerate(index.shape):     # (small: broadcast among themselves first)
        if d != dim and n > 1:
            base = base + (np.arange(n) * strides[d]).reshape(
                (n,) + (1,) * (index.ndim - 1 - d))
    pos = index if strides[dim] == 1 else index * strides[dim]
    return pos if isinstance(base, int) else pos + base


def _gather(x, index, dim):
    check_index_range(index, x.shape[dim] if x.ndim else 1)
    if x.flags.c_contiguous and index.size > 1:
        # (a take of flat positions: NumPy's take_along_axis builds a fancy index of one
        # broadcast arange per dim, ~3x the time)
        return x.reshape(-1).take(_flat_positions(x.shape, index, dim % x.ndim))
    return np.take_along_axis(x, index, axis=dim) if index.shape == x.shape else \
        np.take_along_axis(x[tuple(slice(0, n) for n in index.shape[:dim]) + (slice(None),)
                             + tuple(slice(0, n) for n in index.shape[dim + 1:])],
                           index, axis=dim)


defop("gather", zero_dim_as_one(_gather), args=("self", "index"), save=("index",), grad_fn="GatherBackward0",
      nondiff=("index",),
      vjp=lambda c, g: (g.new_zeros(c.shape(0)).scatter_add(c.dim, c.index, g), None),
      functions=("gather",), complex=True)


def _scatter_add(x, index, src, dim):
    if x.dtype == np.float16:       # (PyTorch adds float16 in float32, rounds once)
        return _scatter_add(x.astype(np.float32), index, src.astype(np.float32),
                            dim).astype(np.float16)
    check_index_range(index, x.shape[dim] if x.ndim else 1)
    out = np.array(x, copy=True)
    idx = list(np.indices(index.shape, sparse=True))
    idx[dim] = index
    np_at.at(np.add, out, tuple(idx), src[tuple(slice(0, n) for n in index.shape)])
    return out


defop("scatter_add", zero_dim_as_one(_scatter_add), args=("self", "index", "src"), save=("index",),
      grad_fn="ScatterAddBackward0", promote=(0, 2), nondiff=("index",),
      vjp=lambda c, g: (g, None, _pad_to(g.gather(c.dim, c.index), c.shape(2))
                        if c.needs(2) else None), functions=("scatter_add",), complex=True)


def _pad_to(g, shape):
    """Zero-pad g (the leading corner) to `shape`: scatter_add may use only part of src."""
    if tuple(g.shape) == tuple(shape):
        return g
    n = 1
    for d in shape:
        n *= d
    geom = (tuple(g.shape), contiguous_strides(shape), 0)
    return g._op("strided_scatter", geom=geom, span=n).reshape(shape)


def _index_select(x, index, dim):
    check_index_range(index, x.shape[dim] if x.ndim else 1)
    return np.take(x, index, axis=dim)


defop("index_select", _index_select,
      args=("self", "index"), save=("index",), grad_fn="IndexSelectBackward0", nondiff=("index",),
      vjp=lambda c, g: (g.new_zeros(c.shape(0)).index_add(c.dim, c.index, g), None),
      functions=("index_select",), complex=True)


def _index_add(x, index, src, dim, alpha=1):
    check_index_range(index, x.shape[dim] if x.ndim else 1)
    out = np.array(x, copy=True)
    idx = [slice(None)] * x.ndim
    idx[dim] = index
    np_at.at(np.add, out, tuple(idx), src * alpha if alpha != 1 else src)
    return out


defop("index_add", _index_add, args=("self", "index", "source"), save=("index",),
      grad_fn="IndexAddBackward0", promote=(0, 2), nondiff=("index",),
      vjp=lambda c, g: (g, None, g.index_select(c.dim, c.index) * conj(c.alpha) if c.needs(2) else None),
      functions=("index_add",), eager_kernel="shaped", complex=True)
