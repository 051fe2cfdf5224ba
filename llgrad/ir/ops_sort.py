"""Sorting (sort, topk) and scattering (scatter, scatter_reduce).

sort gives (values, indices), NaN counting as the largest value, as PyTorch's sort; with
stable=True ties keep their original order in both directions, otherwise they come in the
order of PyTorch's std::sort, as do topk's, kthvalue's and mode's picks among equal values
(select_order.py). Their gradient
puts the values' gradient back where each value came from.

scatter writes src (a tensor, or one number) at `index` along `dim` (repeated positions:
the last write in C order wins); scatter_reduce combines src into self with "sum",
"prod", "mean", "amax" or "amin" (include_self=False: the positions written start from
the reduction's identity instead of self's value). Gradients are PyTorch's
(scatter_reduce_backward in torch/csrc/autograd/FunctionsManual.cpp)."""
import numpy as np

from . import np_at
from .index_bounds import check_index_range
from .ops_copy import preserve_empty
from .ops_data_movement import zero_dim_as_one
from .optable import defop
from .select_order import (kthvalue_position, mode_position, sort_positions, sort_replayed,
                           topk_positions)


def _is_tensor(x):
    return hasattr(x, "_dtype")


def _argsort(x, dim, descending):
    """Stable argsort along dim; descending keeps ties in their original order too (the
    reversed input sorted ascending, then read backwards)."""
    if not descending:
        return np.argsort(x, axis=dim, kind="stable")
    n = x.shape[dim]
    rev = np.flip(x, dim)
    return (n - 1) - np.flip(np.argsort(rev, axis=dim, kind="stable"), dim)


def _sort(x, dim=0, descending=False, stable=None):
    if x.ndim == 0:
        return np.array(x), np.zeros((), np.int64)
    idx = _argsort(x, dim, descending).astype(np.int64)
    if sort_replayed(x.shape, x.dtype, dim, descending, stable):
        # PyTorch's order among equal values is its std::sort's: replayed on those slices
        _replay(x, idx, dim, _ties(x, dim), lambda row: sort_positions(row, descending))
    values = np.take_along_axis(x, idx, axis=dim)
    if x.flags.c_contiguous:
        return values, idx
    laid = preserve_empty(x), preserve_empty(x, np.int64)    # (PyTorch's: x's empty_like)
    laid[0][...], laid[1][...] = values, idx
    return laid


def _topk(x, k, dim=0, largest=True, sorted=True):
    if x.ndim == 0:
        return np.array(x), np.zeros((), np.int64)
    n = x.shape[dim]
    if 0 < k and k * 4 <= n and (sorted or k * 64 <= n) and x.dtype.kind in "iuf":
        return _topk_selected(x, k, dim, largest, sorted)
    idx = _argsort(x, dim, largest).astype(np.int64)
    idx = np.array(np.take(idx, np.arange(k), axis=dim))
    n = x.shape[dim]
    if k and n:
        # PyTorch's picks among equal values, and its order with sorted=False where it does
        # not sort (nth_element's), are its algorithm's: replayed on those slices alone
        redo = _ties(x, dim) if sorted or k * 64 <= n else np.ones(idx.shape[:dim] +
                                                                   idx.shape[dim + 1:], bool)
        _replay(x, idx, dim, redo, lambda row: topk_positions(row, k, largest, sorted))
    return np.take_along_axis(x, idx, axis=dim), idx


def _topk_selected(x, k, dim, largest, sorted):
    """topk of few (k * 4 <= n) by selection, not a sort of every slice (a top-5 of 1000
    logits took 2.6 ms for 64 rows): each slice's k-th value by np.partition (values only:
    ~5x faster than argpartition), its k values those on the right side of it (NaN the
    largest) in index order, then ordered by value; where that order or set is not unique
    (two of them equal, or one equal to a value left out: more than k on that side) the
    slice is replayed as _topk does (PyTorch's picks among ties)."""
    xs = np.moveaxis(x, dim, -1)
    n = xs.shape[-1]
    if xs.ndim < 2 or xs.dtype.kind != "f" or not xs.size:
        return _topk_partitioned(x, k, dim, largest, sorted)
    flat = xs.reshape(-1, n)
    kth = n - k if largest else k - 1
    edge = np.partition(flat, kth, axis=-1)[:, kth:kth + 1]
    with np.errstate(invalid="ignore"):
        side = ((flat >= edge) | (flat != flat)) if largest else ((flat <= edge) | (edge != edge))
    exact = side.sum(-1) == k           # (else ties at the edge, or a NaN edge: the old way)
    every = exact.all()
    if not every:
        rows = np.nonzero(~exact)[0]
        v_bad, i_bad = _topk_partitioned(flat[rows], k, 1, largest, sorted)
    part = np.nonzero(side if every else side[exact])[1].reshape(-1, k)
    vals = np.take_along_axis(flat if every else flat[exact], part, -1)
    order = np.argsort(vals, axis=-1, kind="stable")        # (ascending, NaN last)
    vals = np.take_along_axis(vals, order, -1)
    a, b = vals[..., 1:], vals[..., :-1]
    tied = ((a == b) | ((a != a) & (b != b))).any(-1)
    idx = np.empty((flat.shape[0], k), np.int64)
    idx[exact] = np.take_along_axis(part, order[..., ::-1] if largest else order, -1)
    if not every:
        idx[rows] = i_bad
    tied_all = np.zeros(flat.shape[0], bool)
    tied_all[exact] = tied
    idx = np.ascontiguousarray(np.moveaxis(idx.reshape(xs.shape[:-1] + (k,)), -1, dim))
    _replay(x, idx, dim, tied_all.reshape(xs.shape[:-1]),
            lambda row: topk_positions(row, k, largest, sorted))
    return np.take_along_axis(x, idx, axis=dim), idx


def _topk_partitioned(x, k, dim, largest, sorted):
    """_topk_selected by argpartition (integers, 1-D slices, and the slices with ties at
    the edge)."""
    xs = np.moveaxis(x, dim, -1)
    n = xs.shape[-1]
    part = np.argpartition(xs, n - k if largest else k - 1, axis=-1)
    part = part[..., n - k:] if largest else part[..., :k]
    vals = np.take_along_axis(xs, part, -1)
    order = np.argsort(vals, axis=-1, kind="stable")        # (ascending, NaN last)
    vals = np.take_along_axis(vals, order, -1)
    a, b = vals[..., 1:], vals[..., :-1]
    tied = ((a == b) | ((a != a) & (b != b))).any(-1)
    edge = vals[..., :1] if largest else vals[..., -1:]     # (the last value taken)
    same = (xs == edge) | ((xs != xs) & (edge != edge))
    tied |= same.sum(-1) > 1                                # (ties inside were counted)
    idx = np.take_along_axis(part, order[..., ::-1] if largest else order, -1)
    idx = np.ascontiguousarray(np.moveaxis(idx.astype(np.int64), -1, dim))
    _replay(x, idx, dim, tied, lambda row: topk_positions(row, k, largest, sorted))
    return np.take_along_axis(x, idx, axis=dim), idx


def _kthvalue(x, k, dim=0):
    """(values, indices) of the k-th smallest along dim, dim kept (size 1); among equal
    values the one PyTorch's quickselect returns."""
    if x.ndim == 0:
        return np.array(x), np.zeros((), np.int64)
    # (a partition, not a sort: where the k-th value is unique in its slice any method
    # finds the same position, and the slices where it is not are replayed below)
    idx = np.take(np.argpartition(x, k - 1, axis=dim), [k - 1], axis=dim).astype(np.int64) \
        if x.shape[dim] else np.take(_argsort(x, dim, False), [k - 1], axis=dim)
    v = np.take_along_axis(x, idx, axis=dim)
    equal = (x == v) | ((x != x) & (v != v))
    _replay(x, idx, dim, equal.sum(dim) > 1, lambda row: [kthvalue_position(row, k)])
    return _fresh(np.take_along_axis(x, idx, axis=dim)), _fresh(idx)


def _fresh(a):
    """a in a new C-ordered buffer (PyTorch's empty results: row-major strides, size-1
    dims included, which NumPy's take_along_axis leaves as they fall)."""
    out = np.empty(a.shape, a.dtype)
    out[...] = a
    return out


def _mode(x, dim=0):
    """(values, indices) of the most frequent value along dim, dim kept (size 1), as
    PyTorch's CPU kernel picks them (select_order.mode_position)."""
    if x.ndim == 0:
        return np.array(x), np.zeros((), np.int64)
    xs = np.moveaxis(x, dim, -1)
    idx = np.zeros(xs.shape[:-1] + (1,), np.int64)
    for at in np.ndindex(xs.shape[:-1]):
        idx[at] = mode_position(xs[at])
    idx = _fresh(np.moveaxis(idx, -1, dim))
    return _fresh(np.take_along_axis(x, idx, axis=dim)), idx


def _ties(x, dim):
    """Per slice along dim: whether two of its values are equal (NaNs count as equal)."""
    s = np.sort(np.moveaxis(x, dim, -1), axis=-1)
    a, b = s[..., 1:], s[..., :-1]
    return ((a == b) | ((a != a) & (b != b))).any(-1)


def _replay(x, idx, dim, which, positions):
    """idx's slices along dim where `which` holds, from positions(slice of x)."""
    xs, ids = np.moveaxis(x, dim, -1), np.moveaxis(idx, dim, -1)
    for at in zip(*np.nonzero(which)) if which.ndim else [()] if which else ():
        ids[at] = positions(xs[at])


def _select_back(c, gs):
    """The values' gradient scattered back to where each value came from."""
    g, idx = gs[0], c.result1
    if not c.shape(0):
        return (g,)
    return (g.new_zeros(c.shape(0)).scatter_add(c.dim, idx, g),)


# (sort.stable, SortBackward1, is the overload a `stable=` argument selects, True or False)
defop("sort", _sort, nout=2, save=("result1",), vjp=_select_back,
      grad_fn=lambda ins, at: "SortBackward0" if at.get("stable") is None else "SortBackward1")
# (native code calls the NumPy implementations back, codegen/lowerings/host_call.py: the
# replayed picks among equal values are Python)
defop("topk", _topk, nout=2, save=("result1",), grad_fn="TopkBackward0", vjp=_select_back,
      native_host=True)
defop("mode", _mode, nout=2, save=("result1",), grad_fn="ModeBackward0", vjp=_select_back,
      native_host=True)
defop("kthvalue", _kthvalue, nout=2, save=("result1",), grad_fn="KthvalueBackward0",
      vjp=_select_back, native_host=True)


# ---- scatter --------------------------------------------------------------------------------

def _positions(index, dim, n):
    check_index_range(index, n)
    idx = list(np.indices(index.shape, sparse=True))
    idx[dim] = index
    return tuple(idx)


def _part(src, index):
    """The leading corner of src that index addresses (src may be larger)."""
    return src[tuple(slice(0, n) for n in index.shape)]


def _scatter(x, index, src, dim):
    out = np.array(x, copy=True)
    if index.size:
        vals = _part(src, index) if isinstance(src, np.ndarray) and src.ndim else src
        out[_positions(index, dim, x.shape[dim] if x.ndim else 1)] = vals
    return out


def _scatter_vjp(c, g):
    gx = g.scatter(c.dim, c.index, 0) if c.needs(0) else None
    gs = _embed(g.gather(c.dim, c.index), c.shape(2)) if c.needs(2) else None
    return gx, None, gs


def _embed(g, shape):
    """g in the leading corner of zeros of shape (index may address only part of src)."""
    from_shape = tuple(g.shape)
    if from_shape == tuple(shape):
        return g
    strides, s = [], 1
    for n in reversed(shape):
        strides.insert(0, s)
        s *= n
    return g._op("strided_scatter", geom=(from_shape, tuple(strides), 0), span=s).reshape(shape)


defop("scatter", zero_dim_as_one(_scatter), args=("self", "index", "src"), save=("index",),
      nondiff=("index",), vjp=_scatter_vjp,
      grad_fn=lambda ins, at: "ScatterBackward0" if _is_tensor(ins[2]) else "ScatterBackward1", complex=True)


_IDENTITY = {"sum": 0, "mean": 0, "prod": 1}


def _identity(reduce, dtype):
    if reduce in _IDENTITY:
        return _IDENTITY[reduce]
    if dtype.kind == "f":
        return -np.inf if reduce == "amax" else np.inf
    if dtype.kind == "b":
        return reduce == "amin"
    info = np.iinfo(dtype)
    return info.min if reduce == "amax" else info.max


_UFUNC = {"sum": np.add, "mean": np.add, "prod": np.multiply, "amax": np.maximum,
          "amin": np.minimum}


def _scatter_reduce(x, index, src, dim, reduce, include_self=True):
    if x.dtype == np.float16:       # (PyTorch reduces float16 in float32, rounds once)
        return _scatter_reduce(x.astype(np.float32), index, src.astype(np.float32), dim,
                               reduce, include_self).astype(np.float16)
    out = np.array(x, copy=True)
    pos = _positions(index, dim, x.shape[dim] if x.ndim else 1)
    vals = _part(src, index).astype(x.dtype, copy=False)
    if not include_self:
        out[pos] = _identity(reduce, x.dtype)
    np_at.at(_UFUNC[reduce], out, pos, vals)
    if reduce == "mean":
        count = np.full(x.shape, 1 if include_self else 0, dtype=np.int64)
        np.add.at(count, pos, 1)
        count = np.maximum(count, 1)
        out = out / count.astype(x.dtype) if x.dtype.kind == "f" else np.floor_divide(out, count)
    return np.asarray(out, dtype=x.dtype)


def _scatter_reduce_vjp(c, g):
    x, index, dim, r, inc = c.self, c.index, c.dim, c.reduce, c.include_self
    src = _part_of(c.src, index)        # (the part of src that index addresses)
    if r == "sum":
        gx, gs = g, g.gather(dim, index)
    elif r == "prod":
        masked = x.masked_fill(x == 0, 1)
        gx = g * masked.scatter_reduce(dim, index, src, r, include_self=inc) / masked
        szero = src == 0
        nzero = x.new_zeros(x.shape).scatter_add(dim, index, szero.to(x.dtype)).gather(dim, index)
        single = szero & (nzero == 1)
        # at a position's only zero the gradient is the product of the others
        msrc = x.scatter_reduce(dim, index, src.masked_fill(single, 1), r, include_self=inc)
        gs = (g * msrc).gather(dim, index).where(
            single, (g * c.result).gather(dim, index) / src.masked_fill(szero, 1))
    elif r == "mean":
        n = (x.new_ones(x.shape) if inc else x.new_zeros(x.shape)).scatter_add(
            dim, index, x.new_ones(index.shape))
        n = n.masked_fill(n == 0, 1)
        gx = g / n
        gs = g.gather(dim, index) / n.gather(dim, index)
    else:                               # amax, amin: shared evenly among the extremes
        value = c.result.gather(dim, index)
        self_is, src_is = x == c.result, src == value
        count = self_is.to(x.dtype).scatter_add(dim, index, src_is.to(x.dtype))
        share = g / count
        gx = self_is * share
        gs = src_is * share.gather(dim, index)
    if not inc:
        gx = gx.scatter(dim, index, 0)
    return (gx if c.needs(0) else None, None, _embed(gs, c.shape(2)) if c.needs(2) else None)


def _part_of(src, index):
    if tuple(src.shape) == tuple(index.shape):
        return src
    return src[tuple(slice(0, n) for n in index.shape)]


defop("scatter_reduce", zero_dim_as_one(_scatter_reduce), args=("self", "index", "src"),
      save=("self", "index", "src", "result"), nondiff=("index",),
      grad_fn="ScatterReduceBackward0", vjp=_scatter_reduce_vjp)
