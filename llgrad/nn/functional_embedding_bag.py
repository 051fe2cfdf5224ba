"""F.embedding_bag (torch.nn.functional's, and ATen's checks and messages) as a composition:
the looked-up rows (index_select, whose gradient adds into the weight's rows) reduced into
their bags by index_add (sum, mean) or scatter_reduce 'amax' (max).

Each index's bag comes from tensor ops, as ATen's make_offset2bag builds it: a count of the
bags starting at each position (index_add of ones at the offsets, so empty bags are
skipped), summed by cumsum. Nothing is read out of the indices or offsets to shape the
result, so a compiled call serves any offsets of the same length. Indices equal to
padding_idx go to one extra row that is cut off at the end: they add to no bag and count in
no mean, and their rows get no gradient. Empty bags are zeros in every mode.
scale_grad_by_freq divides each row's gradient by that row's count among the indices (the
documented rule, F.embedding's; PyTorch's CPU embedding_bag backward divides the i-th
distinct row's by the count of the i-th entry of the sorted indices, a bug not copied). In
max mode a maximum that two different rows share gives its gradient to the first of them in
the bag, as PyTorch's kernel (amax's rule would split it)."""
import warnings

import numpy as np

from ..runtime import dispatch, grad_mode, trace_state
from ..runtime.autograd_function import Function
from ..runtime.creation import arange, ones, zeros
from ..runtime.dtypes import bool_, int64
from ..runtime.node_names import rename
from ..runtime.tensor import Tensor
from ..runtime.vmap_fallback import meta_on_mismatch
from .functional_embedding_sparse import sparse_embedding

__all__ = ["embedding_bag", "embedding_renorm_"]

_MODES = {"sum": 0, "mean": 1, "max": 2}


def _values(t):
    """t's values for a check, or None where it has none (a batched tensor under vmap)."""
    d = t._data
    return d if isinstance(d, np.ndarray) else None


def _check_dtypes(weight, indices, offsets, per_sample_weights):
    for t in (indices, offsets):
        if t._dtype._cat != 1 or t.dtype.name not in ("int64", "int32"):
            raise RuntimeError("Expected tensor for argument #1 'indices' to have one of the "
                               "following scalar types: Long, Int; but got "
                               f"{t.type()} instead (while checking arguments for "
                               "embedding_bag)")
    if not weight.is_floating_point():
        raise RuntimeError("Expected tensor for argument #1 'weight' to have one of the "
                           "following scalar types: Half, BFloat16, Float, Double; but got "
                           f"{weight.type()} instead (while checking arguments for "
                           "embedding_bag)")
    if per_sample_weights is not None and per_sample_weights.dtype != weight.dtype:
        raise RuntimeError("Expected tensor for argument #1 'weight' to have the same type as "
                           "tensor for argument #1 'per_sample_weights'; but type "
                           f"{weight.type()} does not equal {per_sample_weights.type()} (while "
                           "checking arguments for embedding_bag)")


def _check_values(indices, offsets, num_weights, fbgemm):
    n = indices.shape[0]
    offs = _values(offsets)
    if offs is not None and offs.size:
        if offs[0] != 0:
            raise RuntimeError("offsets[0] has to be 0, i.e., the first sequence in the "
                               "mini-batch has to start from position 0. However, got "
                               f"{int(offs[0])}")
        if offs[-1] > n:
            raise RuntimeError(f"offsets[-1] can not be greater than input's length {n} but "
                               f"got offsets[-1] of {int(offs[-1])}")
    idx = _values(indices)
    if idx is not None and idx.size:
        bad = np.flatnonzero((idx < 0) | (idx >= num_weights))
        if bad.size and not fbgemm:     # (PyTorch's words: its plain kernel's, fbgemm's)
            raise RuntimeError("embedding_bag: Expected idx >= 0 && idx < num_embeddings but "
                               f"found idx to be {int(idx[bad[0]])}")
        if bad.size:        # (the index counted from the start of its bag, as PyTorch's)
            p = int(bad[0])
            start = int(offs[np.searchsorted(offs, p, "right") - 1]) if offs is not None and \
                offs.size else 0
            raise RuntimeError(f"Index {p - start} of input takes value {int(idx[p])} "
                               f"which is not in the valid range [0, {num_weights})")


def _eager_bag(starts, n):
    """make_offset2bag's bag of each of the n indices from the bags' starts, worked out in
    NumPy (6 ops fewer per call); None where the tensor ops must build it: under a trace
    (a compiled call serves any offsets), vmap, the meta device or the profiler, or for
    starts outside [0, n] (index_add's checks)."""
    offs = starts._data
    if type(offs) is not np.ndarray or trace_state.state.tracer is not None or \
            dispatch.batching is not None or dispatch.meta is not None or \
            dispatch.profiler is not None or starts._dtype._cat != 1:
        return None
    if offs.size and (offs.min() < 0 or offs.max() > n):
        return None
    first = np.bincount(offs.astype(np.int64, copy=False), minlength=n + 1)
    return Tensor._from_array(np.cumsum(first[:n], dtype=np.int64) - 1)


def embedding_renorm_(weight, input, max_norm, norm_type):
    """As torch.embedding_renorm_ (F.embedding's and embedding_bag's max_norm): the rows of
    `weight` that `input` uses whose norm exceeds max_norm are rescaled in place to norm
    max_norm (no autograd); returns weight. Tensor ops only (the norms in float64, a mask of
    the rows used, the scale 1 elsewhere), so that a compiled call renormalises the rows its
    own call uses, by its own weights' norms."""
    if input.numel() == 0:
        return weight
    with grad_mode.no_grad():
        # (ATen's row.norm(norm_type): inf the largest |x|, 0 the count of nonzeros)
        norms = weight.double().norm(p=float(norm_type), dim=1)
        used = zeros(weight.shape[0], dtype=bool_)
        used[input.reshape(-1)] = True
        scale = (max_norm / (norms + 1e-7)).where(used & (norms > max_norm), 1.0)
        weight.mul_(scale.to(weight.dtype).unsqueeze(1))
    return weight


class _ScaleGrad(Function):
    """Identity whose backward multiplies the gradient by a fixed tensor (the
    scale_grad_by_freq factors: exact, where an identity built of detach would turn an
    infinite row into NaN)."""

    @staticmethod
    def forward(ctx, x, scale):
        ctx.scale = scale
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.scale, None


class _MeanOfBags(Function):
    """sums / counts whose backward multiplies by the counts' reciprocals, as PyTorch's
    sparse embedding_bag backward (grad * (1 / count), rounded to the dtype first)."""

    @staticmethod
    def forward(ctx, sums, counts):
        ctx.scale = counts.reciprocal()
        return sums / counts

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.scale, None


_MeanOfBags._backward_cls.__name__ = "EmbeddingBagBackward0"      # (its grad_fn: PyTorch's)


def _bags(weight, indices, offsets, scale_grad_by_freq, mode, per_sample_weights,
          include_last_offset, padding_idx, sparse=False):
    """ATen's _embedding_bag on checked arguments: (B, D) from 1-D indices and offsets;
    sparse: weight's gradient is sparse (functional_embedding_sparse.py)."""
    num_weights, dim = weight.shape
    if padding_idx is not None:
        if not -num_weights <= padding_idx < num_weights:
            raise RuntimeError("padding_idx must be within the number of embeddings, "
                               f"-{num_weights} through {num_weights - 1}, but got {padding_idx}")
        padding_idx %= num_weights
    # (sum and mean over a weight of float32 or narrower run on fbgemm, in words of its own)
    _check_values(indices, offsets, num_weights, mode != 2 and weight.dtype.name != "float64")
    n = indices.shape[0]
    starts = offsets[:-1] if include_last_offset else offsets
    b = starts.shape[0]
    idx = indices.to(int64)
    bag = _eager_bag(starts, n)
    composed = bag is None      # (a trace, vmap, meta or profile: the graph as it was)
    if composed:
        # offset2bag: how many bags start at or before each position, less one
        first = zeros(n + 1, dtype=int64).index_add(0, starts.to(int64), ones(b, dtype=int64))
        bag = first[:n].cumsum(0) - 1
    if padding_idx is not None:          # padding goes to the extra row b, cut off below
        bag = bag.masked_fill(idx == padding_idx, b)
    if include_last_offset and b + 1 == offsets.shape[0]:   # (past the last offset: no bag)
        bag = bag.masked_fill(arange(n, dtype=int64) >= offsets[-1].to(int64), b)
    # (bag b: padding, indices past the last offset, or every index when there are no bags)
    padded = padding_idx is not None or include_last_offset or b == 0 or composed
    if sparse:      # (an entry per index, padding's left out; scale_grad_by_freq raises)
        return _bag_rows(sparse_embedding(idx, weight, padding_idx, scale_grad_by_freq),
                         weight, bag, b, n, mode, per_sample_weights, _MeanOfBags.apply,
                         padded)
    rows = weight.index_select(0, idx)
    if scale_grad_by_freq and grad_mode.is_grad_enabled() and weight.requires_grad:
        counts = zeros(num_weights, dtype=int64).index_add(0, idx, ones(n, dtype=int64))
        scale = 1.0 / counts.index_select(0, idx).to(weight.dtype)
        rows = _ScaleGrad.apply(rows, scale.unsqueeze(1))
    return _bag_rows(rows, weight, bag, b, n, mode, per_sample_weights, padded=padded)


def _bag_rows(rows, weight, bag, b, n, mode, per_sample_weights, mean=None, padded=True):
    """The bags' sums, means or maxima of the looked-up rows (bag b: padding, cut off);
    mean(sums, counts) divides (its backward, _MeanOfBags's, as PyTorch's sparse one)."""
    dim = weight.shape[1]
    if mode == 2:
        bags = bag.unsqueeze(1).expand(n, dim)
        out = weight.new_zeros((b + 1, dim)).scatter_reduce(0, bags, rows, "amax",
                                                            include_self=False)
        if n and rows.requires_grad:
            out = _first_max(rows, out, bags, n)
        return out[:b]
    if per_sample_weights is not None:
        rows = rows * per_sample_weights.unsqueeze(1)
    # (bag b, cut off below, only where some index goes to no bag; else b rows, no slice)
    out = weight.new_zeros((b + 1, dim)).index_add(0, bag, rows)[:b] if padded else \
        weight.new_zeros((b, dim)).index_add(0, bag, rows)
    if mode == 1:
        count = weight.new_zeros((b + 1,)).index_add(0, bag, weight.new_ones((n,)))[:b]
        count = count.clamp_min(1).unsqueeze(1)
        out = out / count if mean is None else mean(out, count)
    return out


def _first_max(rows, out, bags, n):
    """The bags' maxima out, taken from the first row of each bag that holds it, as
    PyTorch's max kernel keeps (a later equal value is not greater) and its backward gives
    the gradient to (amax's would split it among ties); empty bags stay zero."""
    m = out.detach().index_select(0, bags[:, 0])
    r = rows.detach()
    hit = (r == m) | (r.isnan() & m.isnan())
    pos = arange(n, dtype=int64).unsqueeze(1).expand(bags.shape).masked_fill(~hit, n)
    first = bags.new_full(out.shape, n).scatter_reduce(0, bags, pos, "amin")
    return rows.gather(0, first.clamp_max(n - 1)).masked_fill(first == n, 0)


@meta_on_mismatch
def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2,
                  scale_grad_by_freq=False, mode="mean", sparse=False, per_sample_weights=None,
                  include_last_offset=False, padding_idx=None):
    """As torch.nn.functional.embedding_bag: the sums, means or maxima of bags of rows of
    weight. input is 2-D (B fixed-length bags) or 1-D with offsets (each bag's start; with
    include_last_offset one more, the end); per_sample_weights scale the rows (mode 'sum'),
    indices equal to padding_idx are left out; sparse=True gives weight a sparse gradient
    (one entry per index, as PyTorch's)."""
    if weight.dtype == int64 and input.is_floating_point():
        warnings.warn("Argument order of nn.functional.embedding_bag was changed. Usage "
                      "`embedding_bag(weight, input, ...)` is deprecated, and should now be "
                      "`embedding_bag(input, weight, ...)`.", stacklevel=2)
        weight, input = input, weight
    if per_sample_weights is not None and input.size() != per_sample_weights.size():
        raise ValueError(f"embedding_bag: If per_sample_weights ({per_sample_weights.shape}) is "
                         f"not None, then it must have the same shape as the input "
                         f"({input.shape})")
    if weight.dim() != 2:
        raise ValueError(f"weight has to be a 2D Tensor, but got Tensor of dimension "
                         f"{weight.dim()}")
    if input.dim() == 2:
        if offsets is not None:
            raise ValueError("if input is 2D, then offsets has to be None, as input is treated is "
                             "a mini-batch of fixed length sequences. However, found offsets of "
                             f"type {type(offsets)}")
        if input.shape[1] == 0:
            raise RuntimeError("step must be nonzero")
        offsets = arange(0, input.numel(), input.shape[1], dtype=input.dtype)
        include_last_offset = False
        input = input.reshape(-1)
        if per_sample_weights is not None:
            per_sample_weights = per_sample_weights.reshape(-1)
    elif input.dim() == 1:
        if offsets is None:
            raise ValueError("offsets has to be a 1D Tensor but got None")
        if offsets.dim() != 1:
            raise ValueError("offsets has to be a 1D Tensor")
    else:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension "
                         f"{input.dim()}")
    if mode not in _MODES:
        raise ValueError("mode has to be one of sum, mean or max")
    if mode == "max":
        if scale_grad_by_freq:
            raise ValueError("max mode does not support scaling the gradient by the frequency")
        if sparse:
            raise ValueError("max mode does not support sparse weights")
    if max_norm is not None:             # PyTorch renormalises the used rows in place first
        embedding_renorm_(weight, input, max_norm, norm_type)
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError("embedding_bag: per_sample_weights was not None. "
                                  "per_sample_weights is only supported for mode='sum' (got "
                                  f"mode='{mode}'). Please open a feature request on GitHub.")
    _check_dtypes(weight, input, offsets, per_sample_weights)
    return rename(_bags(weight, input, offsets, scale_grad_by_freq, _MODES[mode],
                        per_sample_weights, include_last_offset, padding_idx,
                        sparse and weight.requires_grad and grad_mode.is_grad_enabled()),
                  "EmbeddingBagBackward0")
