"""PyTorch's writes of slices or elements at indices, written as index_put: index_fill /
index_copy / put (and their in-place forms), fill_diagonal_, and llgrad.index_put(_)."""
import math

import numpy as np

import warnings

from ..ir import OPS
from . import dtypes, trace_state
from .creation import tensor as _tensor
from .creation_checks import fill_value_fits
from .dispatch import scalar_type_name as tname
from .dispatch import call
from .functions import _method_fn
from .functions_math import attach, make_inplace
from .inplace import call_inplace
from .shapes import check_index_bounds, norm_dim
from .tensor import Tensor
from .user_frames import user_stacklevel
from .autocast_cast import autocast_promote
from .node_names import torch_node


def _along(input, dim, index, what):
    d = norm_dim(dim, input._data.ndim)
    if index._dtype is not dtypes.int64:        # (PyTorch's types and words, op by op)
        if what == "index_fill_":
            raise IndexError("index_fill_(): Expected dtype int64 for index.")
        raise RuntimeError(f"index_copy_(): Expected a long tensor for index, but got "
                           f"{tname(index._dtype)}")
    if index._data.ndim > 1:
        if what == "index_fill_":
            raise RuntimeError("Index has to be a vector/scalar")
        raise IndexError(f"index_copy_(): Index should have dimension 1 or 0 (got "
                         f"{index._data.ndim})")
    n = input._data.shape[d] if input._data.ndim else 1
    if what == "index_fill_":           # (index_fill reads a negative index from the end)
        check_index_bounds(index, n, d, lambda bad: IndexError(
            f"index {bad} is out of bounds for dimension {d} with size {n}"), low=-n)
    else:
        check_index_bounds(index, n, d, lambda bad: IndexError(
            f"index_copy_(): index {bad} is out of bounds for dimension {d} with size {n}"))
    spec = (("slice", None, None, None),) * d + ("T",)
    return spec, index.reshape(-1)


@torch_node(lambda input, dim, index, value: "IndexFillBackward1" if isinstance(value, Tensor) else "IndexFillBackward0")
def index_fill(input, dim, index, value):
    """As torch.index_fill: input with the slices at index along dim set to value."""
    if not input._data.ndim:        # (a 0-d input's dim 0 is one of size 1, as PyTorch's)
        norm_dim(dim, 0)
        return index_fill(input.reshape(1), 0, index, value).reshape(())
    spec, idx = _along(input, dim, index, "index_fill_")
    v = _fill_value(input, value)
    if v.requires_grad:     # (value's gradient counts a slot its index repeats once, PyTorch's)
        mask = index_fill(input.new_zeros(input.shape, dtype=dtypes.bool_), dim, index, True)
        return v.to(input._dtype).where(mask, input)
    return call(OPS["index_put"], (input, v.to(input._dtype), idx),
                {"spec": spec, "accumulate": False})


def _fill_value(input, value):
    """index_fill's value as a tensor, after PyTorch's checks: 0-d, and a number that fits
    input's dtype."""
    if isinstance(value, Tensor) and value._data.ndim:
        raise RuntimeError(f"index_fill_ only supports a 0-dimensional value tensor, but got "
                           f"tensor with {value._data.ndim} dimension(s).")
    # (a value tensor under vmap may be batched: no item() to check, as torch's batching rule)
    if not (isinstance(value, Tensor) and trace_state.state.vmap_levels):
        fill_value_fits(value.item() if isinstance(value, Tensor) else value, input._dtype)
    return value if isinstance(value, Tensor) else _tensor(value, dtype=input._dtype)


def _index_copy_shapes(input, d, index, source):
    """PyTorch's checks that source's slices are input's (else index_put would broadcast a
    source of fewer dims into every indexed slice)."""
    xs, ss = list(input._data.shape), list(source._data.shape)
    if not ss and index._data.size != 1:
        raise IndexError(f"index_copy_(): When source is scalar, index should have one element "
                         f"(got {index._data.size})")
    if ss and len(ss) != len(xs):
        raise IndexError(f"index_copy_(): When source and destination are not scalars, their "
                         f"dimensionality must match. Source dimensionality ({len(ss)}), "
                         f"destination dimensionality ({len(xs)})")
    if xs[:d] + xs[d + 1:] != ss[:d] + ss[d + 1:]:
        raise RuntimeError(f"index_copy_(): Source/destination tensor must have same slice "
                           f"shapes. Destination slice shape: "
                           f"{' '.join(map(str, xs[:d] + xs[d + 1:]))} at dimension {d} and "
                           f"source slice shape: {' '.join(map(str, ss[:d] + ss[d + 1:]))} at "
                           "dimension 0.")
    if ss and index._data.size != ss[d]:
        raise IndexError(f"index_copy_(): Number of indices ({index._data.size}) should be "
                         f"equal to source.size(dim) ({ss[d]})")


@torch_node("IndexCopyBackward0")
def _index_copy(input, dim, index, source):
    """As torch.index_copy: input with the slices at index along dim taken from source."""
    if not input._data.ndim and isinstance(source, Tensor) and source._data.size == 1:
        norm_dim(dim, 0)            # (a 0-d input's dim 0 is one of size 1, as PyTorch's)
        if not source._data.ndim and index._data.size != 1:
            raise IndexError(f"index_copy_(): When source is scalar, index should have one "
                             f"element (got {index._data.size})")
        return _index_copy(input.reshape(1), 0, index, source.reshape(1)).reshape(())
    spec, idx = _along(input, dim, index, "index_copy_")
    if source._dtype is not input._dtype:       # (not promoted: PyTorch's error)
        raise RuntimeError(f"index_copy_(): self and source expected to have the same dtype, "
                           f"but got (self) {tname(input._dtype)} and (source) "
                           f"{tname(source._dtype)}")
    _index_copy_shapes(input, len(spec) - 1, idx, source)
    # (PyTorch's result is contiguous whatever input's layout; index_put keeps input's)
    return call(OPS["index_put"], (input.contiguous(), source, idx),
                {"spec": spec, "accumulate": False})


def index_copy(input, dim, index, source):
    """As torch.index_copy: input with the slices at index along dim taken from source (on
    CPU autocast's promote list; its in-place form, index_copy_, is not)."""
    input, source = autocast_promote(input, source)
    return _index_copy(input, dim, index, source)


@torch_node("PutBackward0")
def put(input, index, source, accumulate=False):
    """As torch.put: input with the elements at index of the flattened input set to (or,
    with accumulate, added) source's."""
    if index._dtype is not dtypes.int64:
        raise RuntimeError(f"put_(): Expected a long tensor for index, but got {tname(index._dtype)}")
    if isinstance(source, Tensor) and source._dtype is not input._dtype:
        raise RuntimeError(f"put_(): self and source expected to have the same dtype, but got "
                           f"self.dtype = {tname(input._dtype)} and source.dtype = "
                           f"{tname(source._dtype)}")
    if source._data.size != index._data.size:    # (index_put would broadcast a one-element one)
        raise IndexError(f"put_(): Expected source and index to have the same number of "
                         f"elements, but got source.numel() = {source._data.size}, "
                         f"index.numel() = {index._data.size}")
    n = input._data.size
    bad = index._data[(index._data >= n) | (index._data < -n)]
    if bad.size:    # (checked before the wrap below: -n - 1 would become -1, a valid index)
        raise IndexError(f"out of range: tried to access index {int(bad.flat[0])} on a tensor "
                         f"of {n} elements.")
    idx = index.reshape(-1)
    idx = idx + (idx < 0).long() * n
    flat = call(OPS["index_put"], (input.reshape(-1), source.reshape(-1), idx),
                {"spec": ("T",), "accumulate": bool(accumulate)})
    return flat.reshape(tuple(input._data.shape))


def _fill_diagonal(self, fill_value, wrap=False):
    nd = self._data.ndim
    if nd < 2:
        raise RuntimeError("dimensions must larger than 1")
    shape = self._data.shape
    if nd > 2 and len(set(shape)) != 1:
        raise RuntimeError("all dimensions of input must be of equal length")
    n = math.prod(shape)
    step = sum(math.prod(shape[k + 1:]) for k in range(nd))
    stop = n if (nd == 2 and wrap) else min(shape) * step
    idx = _tensor(np.arange(0, min(stop, n), step, dtype=np.int64))
    return put(self, idx, _tensor(fill_value, dtype=self._dtype).expand(idx._data.shape))


_index_fill_copy = make_inplace(index_fill, "index_fill_")


def _index_fill_(self, dim, index, value):
    """As torch.Tensor.index_fill_. Into an expanded (self-overlapping) tensor PyTorch
    writes the addressed elements, so every alias of them (deprecated, with its warning);
    the composite's copy_ of a whole result cannot, so that case writes as index_put."""
    expanded = any(st == 0 and n > 1 for st, n in zip(self.stride(), self._data.shape))
    if not expanded or self.requires_grad or isinstance(value, Tensor) and value.requires_grad:
        return _index_fill_copy(self, dim, index, value)
    spec, idx = _along(self, dim, index, "index_fill_")
    v = _fill_value(self, value)
    warnings.warn("Use of index_fill_ on expanded tensors is deprecated. Please clone() the "
                  "tensor before performing this operation. This also applies to advanced "
                  "indexing e.g. tensor[mask] = scalar", UserWarning,
                  stacklevel=user_stacklevel())
    return call_inplace(OPS["index_put"], self, (self, v.to(self._dtype), idx),
                        {"spec": spec, "accumulate": False})


_index_fill_.__name__ = _index_fill_.__qualname__ = "index_fill_"
attach(index_fill)
Tensor.index_fill_ = _index_fill_
attach(put, inplace_name="put_")
attach(index_copy)
Tensor.index_copy_ = make_inplace(_index_copy, "index_copy_")
for _n in ("index_put", "index_put_"):
    _method_fn(_n)
Tensor.fill_diagonal_ = make_inplace(_fill_diagonal, "fill_diagonal_")
del _n
