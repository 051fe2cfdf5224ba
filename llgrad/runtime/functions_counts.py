"""Counting and listing functions whose result's shape depends on the data (bincount,
unique_consecutive) or whose range does (histc), computed on the tensors' NumPy values
(inside llgrad.compile a call runs eagerly: a graph break naming the line; bincount is
traced, its length a value guard, and so is histc with its range given), and the
deprecated torch.range (end included, with PyTorch's warning); PyTorch's checks and
messages. Their results have no gradient (PyTorch defines none: bincount's with weights
requiring grad requires grad, a backward through it raising as PyTorch's)."""
import math
import warnings

import numpy as np

from . import dtypes, trace_state
from .creation import _finish, ones_like, zeros
from .device import check as check_device
from .dispatch import scalar_type_name as tname
from .functions import export
from .methods_sort import traced_runs
from .node import grad_enabled
from .node_names import failing_node, no_derivative, no_derivative_from
from .shapes import norm_dim
from .tensor import Tensor
from .out_write import into
from .vmap_fallback import per_sample


def _untraceable(what):
    tracer = trace_state.state.tracer
    if tracer is not None:
        tracer.untraceable(what)


def _new(arr, dtype):
    return Tensor._from_array(np.array(arr, dtype=dtype.np, order="C"))


def bincount(input, weights=None, minlength=0):
    """As torch.bincount: how often each value 0..max occurs in a 1-d non-negative integer
    tensor (at least minlength bins), or the sums of weights per value (float32 weights give
    float32, any other dtype float64)."""
    dt = input._dtype
    if dt.is_floating_point or dt is dtypes.bool_:
        raise NotImplementedError(f"\"bincount_cpu\" not implemented for '{tname(dt)}'")
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    x = input._data
    if trace_state.state.tracer is not None and x.ndim == 1 and (
            weights is None or weights._data.shape == x.shape):
        return _traced_bincount(input, weights, minlength)
    if x.ndim != 1 or (x.size and x.min() < 0):
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if weights is None:
        return _new(np.bincount(x, minlength=minlength), dtypes.int64)
    if weights._data.ndim != 1 or weights._data.shape[0] != x.shape[0]:
        raise RuntimeError("weights should be 1-d and have the same length as input")
    out = dtypes.float32 if weights._dtype is dtypes.float32 else dtypes.float64
    w = weights._data.astype(np.float64)
    # (PyTorch has no derivative for bincount: with weights requiring grad its result
    # requires grad, a backward through it raises)
    return no_derivative_from(_new(np.bincount(x, weights=w, minlength=minlength), out),
                              (weights,), "bincount")


def _traced_bincount(input, weights, minlength):
    """bincount inside llgrad.compile: index_add_ into bins whose number is a value guard,
    minlength when every value is below it (the usual case, a class count: the trace holds
    for any such values), else the largest value + 1; the values' sign is a guard too (the
    error at a negative one). Summed as eager sums (weights in float64)."""
    if input.numel() and not (input.min() >= 0).item():
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    length = minlength
    if input.numel() and not (input.max() < minlength).item():
        length = input.max().item() + 1
    if input._dtype not in (dtypes.int32, dtypes.int64):   # (index_add_'s index dtypes)
        input = input.to(dtypes.int64)
    if weights is None:
        return zeros(length, dtype=dtypes.int64).index_add_(
            0, input, ones_like(input, dtype=dtypes.int64))
    out = dtypes.float32 if weights._dtype is dtypes.float32 else dtypes.float64
    sums = zeros(length, dtype=dtypes.float64).index_add_(0, input, weights.to(dtypes.float64))
    return no_derivative(sums.to(out) - 0.0, "bincount") if weights.requires_grad and \
        grad_enabled() else sums.to(out)


def _fmt(v):
    return f"{v:g}" if math.isfinite(v) else ("-nan" if v != v else f"{v}")


@per_sample
def histc(input, bins=100, min=0, max=0):  # noqa: A002  (PyTorch's parameter names)
    """As torch.histc: a histogram of the elements in bins equal bins over [min, max] (both 0:
    the data's own range, widened by 1 either way when it is one point); elements outside
    are not counted, max itself goes into the last bin."""
    dt = input._dtype
    if not dt.is_floating_point:
        raise NotImplementedError(f"\"histogram_cpu\" not implemented for '{tname(dt)}'")
    if bins <= 0:
        raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {bins} for dimension 0")
    if trace_state.state.tracer is not None:
        lo, hi = float(min), float(max)
        if not (lo < hi and math.isfinite(lo) and math.isfinite(hi)):
            _untraceable("histc over the data's own range")
        return _traced_histc(input, bins, lo, hi)
    x = input._data.reshape(-1).astype(np.float64)
    lo, hi = float(min), float(max)
    if lo == hi and x.size:
        lo, hi = float(x.min()), float(x.max())
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    if lo > hi:
        raise RuntimeError("torch.histc: max must be larger than min")
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise RuntimeError(f"torch.histc: range of [{_fmt(lo)}, {_fmt(hi)}] is not finite")
    # (PyTorch's kernel computes the bins in the input's dtype, its edges cast into it,
    # rounding at each step: float32's or float16's bins differ from float64's at the edges)
    x, t = input._data.reshape(-1), input._data.dtype.type
    lo, hi = t(lo), t(hi)
    inside = x[(x >= lo) & (x <= hi)]
    with np.errstate(over="ignore", invalid="ignore"):
        pos = (inside - lo) * t(bins) / (hi - lo)
    pos = np.where(np.isfinite(pos), pos, 0).astype(np.int64)   # (float16's inf: PyTorch's 0)
    pos[pos == bins] = bins - 1
    return _new(np.bincount(pos, minlength=bins)[:bins], dt)


def _traced_histc(input, bins, lo, hi):
    """histc inside llgrad.compile, its range given (a calibration plot's [0, 1]): each
    element's bin computed as eager computes it (in the input's dtype), elements outside
    the range counted with weight 0, by index_add_ into the bins."""
    t = input._data.dtype.type
    x = input.reshape(-1)
    lo_t, width = t(lo), t(hi) - t(lo)
    inside = (x >= float(lo_t)) & (x <= float(t(hi)))
    pos = (x - float(lo_t)) * float(t(bins)) / float(width)
    pos = pos.where(pos.isfinite() & inside, pos.new_zeros(())).to(dtypes.int64)
    pos = pos.clamp(0, bins - 1)
    counts = zeros(bins, dtype=dtypes.int64).index_add_(0, pos, inside.to(dtypes.int64))
    return counts.to(input._dtype)


def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    """As torch.unique_consecutive: input with each run of equal consecutive elements (or,
    with dim, slices along dim) kept once; optionally the index of each element's run
    (return_inverse) and the runs' lengths (return_counts)."""
    if trace_state.state.tracer is not None and dim is None and input._data.size and not (
            input.requires_grad and grad_enabled()):
        # (its runs as unique's, without the sort)
        return traced_runs(input.reshape(-1), input._data.shape, return_inverse, return_counts)
    _untraceable("unique_consecutive (its length depends on the values)")
    x = input._data
    if dim is None:
        flat = x.reshape(-1)
        new = np.ones(flat.shape[0], bool)
        new[1:] = flat[1:] != flat[:-1]
        out = flat[new]
        inverse_shape = x.shape
    else:
        d = norm_dim(dim, x.ndim)
        if x.size == 0 and x.shape[d]:
            raise RuntimeError("There are 0 sized dimensions, and they aren't selected, so "
                               "unique cannot be applied")
        moved = np.moveaxis(x, d, 0).reshape(x.shape[d], x.size // max(x.shape[d], 1))
        new = np.ones(moved.shape[0], bool)
        new[1:] = (moved[1:] != moved[:-1]).any(axis=1)
        out = np.compress(new, x, axis=d)
        inverse_shape = (x.shape[d],)
    result = [_new(out, input._dtype)]
    if input.requires_grad and grad_enabled():  # a node whose backward raises, as PyTorch's
        idx = Tensor._from_array(np.flatnonzero(new))
        result[0] = failing_node(
            input.reshape(-1)[idx] if dim is None else input.index_select(d, idx),
            "UniqueConsecutiveBackward0",
            "the derivative for 'unique_consecutive' is not implemented.")
    if return_inverse:
        result.append(_new((np.cumsum(new) - 1).reshape(inverse_shape), dtypes.int64))
    if return_counts:
        starts = np.flatnonzero(new)
        result.append(_new(np.diff(np.append(starts, new.shape[0])), dtypes.int64))
    return result[0] if len(result) == 1 else tuple(result)


def range(start, end, step=1, *, out=None, dtype=None, layout=None, device=None,  # noqa: A001
          requires_grad=False):
    """As torch.range (deprecated, as PyTorch warns): start, start + step, ... up to end
    *included*, in the default float dtype unless dtype says otherwise."""
    warnings.warn("torch.range is deprecated and will be removed in a future release because "
                  "its behavior is inconsistent with Python's range builtin. Instead, use "
                  "torch.arange, which produces values in [start, end).", UserWarning,
                  stacklevel=2)
    check_device(device)
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if (end - start) * step < 0:
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    n = int(math.floor((end - start) / step)) + 1
    d = dtypes.to_dtype(dtype) if dtype is not None else dtypes.get_default_dtype()
    r = _finish((start + step * np.arange(n, dtype=np.float64)).astype(d.np), None,
                requires_grad)
    return into(out, r)


for _f in (bincount, histc, unique_consecutive):
    export(_f)
    setattr(Tensor, _f.__name__, _f)
export(range)
