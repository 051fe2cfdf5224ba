"""sort, argsort, topk (ops of llgrad/ir/ops_sort.py; scatter and scatter_reduce are
methods_scatter.py's), and the
methods whose result's shape depends on the values: masked_select, nonzero, argwhere and
unique. Eagerly they run here on the tensors' data (masked_select is differentiable,
MaskedSelectBackward0, through an op kept out of the table: the table's ops are the ones a
trace can hold). While tracing, masked_select, nonzero and unique (dim None) are bool-mask
indexing, whose count the trace guards; masked_scatter is a gather at the mask's running
count (the count fitting in the source a guard); unique along a dim makes the call run
eagerly (with the usual warning)."""
import functools

import numpy as np

from ..ir.optable import OpDef, method_doc
from . import dtypes, trace_state
from .dispatch import call, scalar_type_name
from .inplace import call_inplace
from .creation import arange
from .functions import _method_fn, stack
from .return_types import named_result
from .node import grad_enabled
from .node_names import failing_node
from .shapes import broadcast_shapes, norm_dim
from .tensor import Tensor
from .vmap_fallback import per_sample, per_sample_inplace

return_sort = named_result("sort")
return_topk = named_result("topk")


def _def(name, fn):
    fn.__name__ = name
    fn.__doc__ = fn.__doc__ or method_doc(name)     # ("As torch.Tensor.<name>.")
    setattr(Tensor, name, fn)


def _untraceable(what):
    tracer = trace_state.state.tracer
    if tracer is not None:
        tracer.untraceable(f"{what} (a data-dependent shape)")


# ---- sort, argsort, topk ----------------------------------------------------------------------

def sort(self, dim=-1, descending=False, *, stable=None):
    d = norm_dim(dim, self._data.ndim)
    if self._data.ndim and self.shape[d] > 1 and self.stride(d) == 0:
        stable = True   # (ATen's kernel leaves a stride-0 dim's indices 0..n-1: stable's)
    return return_sort(*self._op("sort", dim=d, descending=bool(descending),
                                 stable=None if stable is None else bool(stable)))


def argsort(self, dim=-1, descending=False, *, stable=False):
    return sort(self, dim, descending, stable=stable).indices


def msort(self):
    return sort(self, 0).values


_UNSET = object()


def _strict_sort(name, fn):
    """fn as PyTorch's method binds it: two overloads, (dim=-1, descending=False) and
    (*, stable, dim=-1, descending=False), so stable= with dim or descending given by
    position matches neither (TypeError)."""
    @functools.wraps(fn)    # (__wrapped__: numpy_names reads fn's dim for axis=)
    def method(self, *args, stable=_UNSET, **kwargs):
        if stable is _UNSET:
            return fn(self, *args, **kwargs)
        if args:
            got = ", ".join([type(a).__name__ for a in args] +
                            [f"{k}={type(v).__name__}" for k, v in
                             [*kwargs.items(), ("stable", stable)]])
            raise TypeError(
                f"{name}() received an invalid combination of arguments - got ({got}), but "
                f"expected one of:\n * (*, bool stable, int dim = -1, bool descending = False)"
                f"\n * (int dim = -1, bool descending = False)")
        return fn(self, stable=stable, **kwargs)
    return method


def topk(self, k, dim=-1, largest=True, sorted=True):
    if isinstance(k, bool):     # (PyTorch's int argument refuses a bool)
        raise TypeError("topk(): argument 'k' (position 1) must be int, not bool")
    d = norm_dim(dim, self._data.ndim)
    n = self._data.shape[d] if self._data.ndim else 1
    if not 0 <= k <= n:
        raise RuntimeError("selected index k out of range")
    return return_topk(*self._op("topk", k=int(k), dim=d, largest=bool(largest),
                                 sorted=bool(sorted)))


# ---- data-dependent shapes (eager only) ------------------------------------------------------

def _masked_select_vjp(c, g):
    mask = c.mask.expand(c.out_shape)
    return (g.new_zeros(c.out_shape)._op("index_put", g, mask, spec=("T",), accumulate=True),
            None)


def _masked_select(x, mask, out_shape):
    return np.array(np.broadcast_to(x, out_shape)[np.broadcast_to(mask, out_shape)])


# (not in the op table: it cannot be traced, and every op of the table can)
MASKED_SELECT = OpDef("masked_select", _masked_select, vjp=_masked_select_vjp,
                      grad_fn="MaskedSelectBackward0", args=("self", "mask"), save=("mask",),
                      nondiff=("mask",), complex=True)


def masked_select(self, mask):
    """The elements where mask holds, as a 1-D tensor, as torch.Tensor.masked_select
    (differentiable). Inside llgrad.compile it is x[mask] (the mask's count a guard of the
    trace)."""
    if not isinstance(mask, Tensor) or mask._dtype._cat != 0:
        raise RuntimeError("masked_select: expected BoolTensor for mask")
    shape = broadcast_shapes(mask._data.shape, self._data.shape)
    if trace_state.state.tracer is not None:    # (bool-mask indexing: its count guarded)
        return self.expand(shape)[mask.expand(shape)]
    return call(MASKED_SELECT, (self, mask), {"out_shape": shape})


def _masked_scatter(x, mask, source, out_shape):
    m = np.broadcast_to(mask, out_shape)
    out = np.array(np.broadcast_to(x, out_shape))
    out[m] = source.reshape(-1)[:int(m.sum())]
    return out


def _masked_scatter_vjp(c, g):
    mask = c.mask.expand(c.out_shape)
    gs = None
    if c.needs(2):
        taken = g.masked_select(mask)
        n, shape = taken.shape[0], c.shape(2)
        rest = g.new_zeros(max(0, int(np.prod(shape)) - n))
        gs = taken._op("cat", rest, dim=0).reshape(shape)
    return (g.masked_fill(mask, 0) if c.needs(0) else None, None, gs)


# (not in the table either: which source elements land where depends on the mask's values)
MASKED_SCATTER = OpDef("masked_scatter", _masked_scatter, vjp=_masked_scatter_vjp,
                       grad_fn="MaskedScatterBackward0", args=("self", "mask", "source"),
                       save=("mask",), nondiff=("mask",), complex=True)


def _masked_scatter_args(self, mask, source, inplace):
    if not isinstance(source, Tensor):
        raise TypeError(f"masked_scatter(): argument 'source' (position 2) must be Tensor, not "
                        f"{type(source).__name__}")
    if mask._dtype._cat != 0:
        raise RuntimeError(f"masked_scatter_ only supports boolean masks, but got mask with "
                           f"dtype {scalar_type_name(mask._dtype)}")
    if source._dtype is not self._dtype:
        raise RuntimeError(f"masked_scatter: expected self and source to have same dtypes but "
                           f"got{scalar_type_name(self._dtype)} and "
                           f"{scalar_type_name(source._dtype)}")
    shape = tuple(self._data.shape) if inplace else \
        broadcast_shapes(mask._data.shape, self._data.shape)
    mask.expand(shape)          # (PyTorch's error when the mask does not broadcast)
    if trace_state.state.tracer is not None:    # (the count a guard: _masked_scatter_traced)
        if not (mask.expand(shape).sum() <= source._data.size).item():
            raise RuntimeError("Number of elements of source < number of ones in mask")
    elif int(np.broadcast_to(mask._data, shape).sum()) > source._data.size:
        raise RuntimeError("Number of elements of source < number of ones in mask")
    return (self, mask, source), {"out_shape": shape}


def _masked_scatter_traced(self, mask, source, out_shape):
    """masked_scatter while tracing (LLaVA's image features written into the text
    embeddings): the k-th True of the mask takes source's k-th element, by a gather at the
    mask's running count and a where; the result's shape is self's, whatever the mask
    holds (that the count fits in source is a guard of the trace: _masked_scatter_args)."""
    m = mask.expand(out_shape)
    base = self.expand(out_shape)
    if source._data.size == 0:                  # (the mask holds no True: guarded)
        return base.clone()
    pos = (m.reshape(-1).cumsum(0) - 1).clamp(min=0)   # (bool cumsum: int64)
    taken = source.reshape(-1)[pos].reshape(out_shape)
    return taken.where(m, base)


@per_sample
def masked_scatter(self, mask, source):
    """self with the elements where mask holds taken from source in order, as
    torch.Tensor.masked_scatter (differentiable). Inside llgrad.compile it is a gather and
    a where (the mask's count fitting in source a guard of the trace)."""
    args, kw = _masked_scatter_args(self, mask, source, False)
    if trace_state.state.tracer is not None:
        return _masked_scatter_traced(*args, **kw)
    return call(MASKED_SCATTER, args, kw)


@per_sample_inplace
def masked_scatter_(self, mask, source):
    """In-place masked_scatter."""
    args, kw = _masked_scatter_args(self, mask, source, True)
    if trace_state.state.tracer is not None:
        return self.copy_(_masked_scatter_traced(*args, **kw))
    return call_inplace(MASKED_SCATTER, self, args, kw)


def _nonzero_traced(x):
    """nonzero while tracing: the flat positions of the nonzero elements, by bool-mask
    indexing (whose True count the trace guards, tracer/masks.py: a call with another count
    traces again), unravelled into (n, ndim) coordinates."""
    flat = x.reshape(-1)
    pos = arange(flat._data.size)[flat != 0]
    cols, stride = [], 1
    for size in reversed(x._data.shape):
        cols.append(pos.div(stride, rounding_mode="floor").remainder(size))
        stride *= size
    # (n, ndim) as the transpose of (ndim, n), strides (1, n), as eager's and PyTorch's
    return stack(cols[::-1], dim=0).t()


@per_sample
def nonzero(self, *, as_tuple=False):
    """The indices of the nonzero elements, as torch.Tensor.nonzero. Inside llgrad.compile
    their count is a guard of the trace, as a bool mask's is."""
    if trace_state.state.tracer is not None and self._data.ndim > 0:
        out = _nonzero_traced(self)
        return tuple(out.unbind(1)) if as_tuple else out
    _untraceable("nonzero")
    a = self._data
    if as_tuple:
        return tuple(Tensor._from_array(i.astype(np.int64))
                     for i in np.nonzero(a.reshape(1) if a.ndim == 0 else a))
    # (PyTorch's (n, ndim) result is the transpose of an (ndim, n) one: strides (1, n))
    return Tensor._from_array(np.ascontiguousarray(np.argwhere(a).T, np.int64).T)


def argwhere(self):
    """The indices of the nonzero elements, as torch.Tensor.argwhere. Inside llgrad.compile
    the call runs eagerly (the result's shape depends on the values)."""
    return nonzero(self)


def unique(self, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """Sorted unique values (PyTorch sorts on the CPU whatever `sorted` says), the inverse
    indices (int64, input's shape; along dim: one per slice) and the counts. Inside
    llgrad.compile (dim None) a sort and a bool mask of first occurrences, whose count the
    trace guards, as masked_select's."""
    if trace_state.state.tracer is not None and dim is None and self._data.size and not (
            self.requires_grad and grad_enabled()) and self._dtype._cat != 0:
        return _unique_traced(self, return_inverse, return_counts)
    _untraceable("unique")
    a = self._data
    axis = None if dim is None else norm_dim(dim, a.ndim)
    if axis is not None and a.size == 0 and a.shape[axis]:
        raise RuntimeError("There are 0 sized dimensions, and they aren't selected, so unique "
                           "cannot be applied")
    # NaNs stay apart, as in PyTorch (each its own value, sorted last)
    vals, first, inv, counts = np.unique(a, return_index=True, return_inverse=True,
                                         return_counts=True, axis=axis, equal_nan=False)
    if self.requires_grad and grad_enabled():   # a node whose backward raises, as PyTorch's
        idx = Tensor._from_array(first.astype(np.int64))
        name, aten = ("Unique2Backward0", "_unique2") if axis is None else \
            ("UniqueDimBackward0", "unique_dim")
        out = [failing_node(self.reshape(-1)[idx] if axis is None else self.index_select(
            axis, idx), name, f"the derivative for '{aten}' is not implemented.")]
    elif axis:      # (PyTorch's unique_dim: rows of the input moved to the front, moved back)
        out = [Tensor._from_array(np.moveaxis(np.array(np.moveaxis(vals, axis, 0), a.dtype), 0,
                                              axis))]
    else:
        out = [Tensor._from_array(np.array(vals, dtype=a.dtype))]
    if return_inverse:
        out.append(Tensor._from_array(inv.astype(np.int64).reshape(
            a.shape if axis is None else (a.shape[axis],))))
    if return_counts:
        out.append(Tensor._from_array(counts.astype(np.int64)))
    return out[0] if len(out) == 1 else tuple(out)


def _unique_traced(self, return_inverse, return_counts):
    """unique while tracing: the runs of the sorted values (each NaN its own run, sorted
    last, as eager's), the inverse written back through the sort's order."""
    # (stable: nothing here depends on the order among ties, and a stable sort runs native,
    # where torch's tie order is replayed on the host)
    vals, order = self.reshape(-1).sort(stable=True)
    return traced_runs(vals, self._data.shape, return_inverse, return_counts, order)


def traced_runs(vals, shape, return_inverse, return_counts, order=None):
    """The runs of equal neighbours of vals (1-d, not empty) while tracing (unique's after
    its sort, unique_consecutive's): a run starts where a value differs from the one before
    (each NaN its own run), the runs' first values by bool-mask indexing (their count a guard
    of the trace); the inverse is each element's run number (put back through `order`, a
    sort's, where given) in `shape`, the counts the gaps between run starts."""
    n = vals._data.size
    first = vals.new_ones((n,), dtype=dtypes.bool_)
    if n > 1:
        first[1:] = vals[1:] != vals[:-1]
    out = [vals[first]]
    if return_inverse:
        run = first.cumsum(0) - 1
        if order is not None:
            run = run.new_zeros((n,)).scatter(0, order, run)
        out.append(run.reshape(shape))
    if return_counts:
        starts = arange(n)[first]
        ends = starts[1:]._op("cat", starts.new_full((1,), n), dim=0)
        out.append(ends - starts)
    return out[0] if len(out) == 1 else tuple(out)


for _n, _f in (("sort", _strict_sort("sort", sort)), ("argsort", _strict_sort("argsort", argsort)),
               ("msort", msort), ("topk", topk), ("masked_select", masked_select),
               ("masked_scatter", masked_scatter), ("masked_scatter_", masked_scatter_),
               ("nonzero", nonzero), ("argwhere", argwhere), ("unique", unique)):
    _def(_n, _f)
for _n in ("sort", "argsort", "msort", "topk", "masked_select",
           "masked_scatter",
           "nonzero", "argwhere", "unique"):
    _method_fn(_n)
