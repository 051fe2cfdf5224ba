"""The view ops' functional forms: the *_scatter functions (input with a view of it replaced
by src: slice, select, diagonal, as_strided), index_reduce, the *_copy functions (a view
op's result as a fresh contiguous tensor), torch.split and the unsafe_* splits and
nonzero_static.

The scatters are one index_put into the flattened input at the positions the view reads
(found by taking that view of an arange), so they are differentiable in both inputs and
trace as ordinary ops; their grad_fn takes PyTorch's name."""
import numpy as np

from ..ir import OPS
from . import dtypes, trace_state
from .creation import arange, tensor, zeros
from .dispatch import call
from .dispatch import scalar_type_name as tname
from .functions import export
from .node_names import no_derivative, rename
from .shapes import check_as_strided, norm_dim
from .tensor import Tensor
from .user_frames import user_stacklevel
from . import methods_views  # noqa: F401  (the view methods the copies call)
from .vmap_fallback import per_sample, per_sample_inplace


def _check_tensor(x, fn, name, pos):
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}(): argument '{name}' (position {pos}) must be Tensor, not "
                        f"{type(x).__name__}")


def _scatter(input, src, view, grad_fn):
    """input with view(input) replaced by src (src cast to input's dtype)."""
    _check_tensor(input, grad_fn, "input", 1)
    _check_tensor(src, grad_fn, "src", 2)
    pos = view(arange(input.numel()).view(tuple(input._data.shape)))
    if tuple(pos._data.shape) != tuple(src._data.shape):
        raise RuntimeError(f"expected src to have a size equal to the slice of self. src size = "
                           f"{list(src._data.shape)}, slice size = {list(pos._data.shape)}")
    flat = call(OPS["index_put"], (input.reshape(-1), src.to(input._dtype).reshape(-1),
                                   pos.reshape(-1)), {"spec": ("T",), "accumulate": False})
    return rename(flat.view(tuple(input._data.shape)), grad_fn)


def slice_scatter(input, src, dim=0, start=None, end=None, step=1):
    """As torch.slice_scatter: input with input[..., start:end:step, ...] (at dim) set to src."""
    if step <= 0:
        raise RuntimeError("slice step must be positive")
    d = norm_dim(dim, input._data.ndim)
    key = (slice(None),) * d + (slice(start, end, step),)
    return _scatter(input, src, lambda t: t[key], "SliceScatterBackward0")


def select_scatter(input, src, dim, index):
    """As torch.select_scatter: input with input.select(dim, index) set to src."""
    def view(t):
        n = t._data.shape[norm_dim(dim, t._data.ndim)]
        if not -n <= index < n:
            raise IndexError(f"select(): index {index} out of range for tensor of size "
                             f"{list(t._data.shape)} at dimension {dim}")
        return t.select(dim, index)
    return _scatter(input, src, view, "SelectScatterBackward0")


def diagonal_scatter(input, src, offset=0, dim1=0, dim2=1):
    """As torch.diagonal_scatter: input with input.diagonal(offset, dim1, dim2) set to src."""
    return _scatter(input, src, lambda t: t.diagonal(offset, dim1, dim2),
                    "DiagonalScatterBackward0")


def _storage_positions(input):
    """Where each element of input lies in its storage, or None when two share a place
    (PyTorch's as_strided_scatter then scatters into a contiguous clone)."""
    pos = np.zeros((), np.int64) + input._storage_offset()
    for n, st in zip(input._data.shape, input.stride()):
        pos = pos[..., None] + np.arange(n, dtype=np.int64) * st
    return pos if np.unique(pos).size == pos.size else None


def _scatter_in_storage(input, src, size, stride, storage_offset, pos):
    """PyTorch's as_strided_scatter of a strided input: the view is taken of a clone of
    input's whole storage, at storage_offset (default input's own), and what lands where an
    element of input lies is the result's."""
    base = input._storage.base
    off = input._storage_offset() if storage_offset is None else storage_offset
    check_as_strided(tuple(size), tuple(stride), off, base, input._data.itemsize)
    tracer = trace_state.state.tracer
    if tracer is not None:
        tracer.reads_layout(input, "as_strided_scatter of a strided tensor")
    n = base.nbytes // input._data.itemsize
    theirs = arange(n).as_strided(tuple(size), tuple(stride), off)
    if tuple(theirs._data.shape) != tuple(src._data.shape):
        raise RuntimeError(f"expected src to have a size equal to the slice of self. src size = "
                           f"{list(src._data.shape)}, slice size = {list(theirs._data.shape)}")
    mine = tensor(pos.reshape(-1))
    full = zeros(n, dtype=input._dtype).index_put((mine,), input.reshape(-1))
    full = full.index_put((theirs.reshape(-1),), src.to(input._dtype).reshape(-1))
    return rename(full[mine].view(tuple(input._data.shape)), "AsStridedScatterBackward0")


def as_strided_scatter(input, src, size, stride, storage_offset=None):
    """As torch.as_strided_scatter: input with input.as_strided(size, stride, storage_offset)
    set to src (positions counted in input's elements when input is contiguous, else in its
    storage, as PyTorch's)."""
    _check_tensor(input, "AsStridedScatterBackward0", "input", 1)
    if not (input.is_contiguous() and input._storage_offset() == 0):
        pos = _storage_positions(input)
        if pos is not None:
            _check_tensor(src, "AsStridedScatterBackward0", "src", 2)
            return _scatter_in_storage(input, src, size, stride, storage_offset, pos)

    def view(t):
        off = 0 if storage_offset is None else storage_offset
        need = off + sum((s - 1) * st for s, st in zip(size, stride)) + 1 \
            if all(s > 0 for s in size) else 0
        if need > t.numel():
            item = input._dtype.itemsize
            raise RuntimeError(f"setStorage: sizes {list(size)}, strides {list(stride)}, storage "
                               f"offset {off}, and itemsize {item} requiring a storage size of "
                               f"{need * item} are out of bounds for storage of size "
                               f"{t.numel() * item}")
        return t.as_strided(size, stride, off)
    return _scatter(input, src, view, "AsStridedScatterBackward0")


for _fn in (slice_scatter, select_scatter, diagonal_scatter, as_strided_scatter):
    export(_fn)
    setattr(Tensor, _fn.__name__, _fn)


# ---- index_reduce ----------------------------------------------------------------------------

_warned = []


def _index_reduce_args(self, dim, index, source, reduce, fn, include_self):
    if reduce not in ("prod", "mean", "amax", "amin"):
        raise RuntimeError(f"index_reduce(): Expected reduce to be one of prod, mean, amax or "
                           f"amin but got {reduce}.")
    if not _warned:
        _warned.append(True)
        trace_state.warn_first("index_reduce() is in beta and the API may change at any "
                               "time.", UserWarning, stacklevel=user_stacklevel())
    nd = self._data.ndim
    d = norm_dim(dim, nd)
    if index._dtype not in (dtypes.int32, dtypes.int64):
        raise RuntimeError(f"{fn}(): Expected dtype int32/int64 for index but got: "
                           f"{tname(index._dtype)}")
    if index._data.ndim > 1:
        raise IndexError(f"{fn}(): Index is supposed to be a vector")
    if source._data.ndim and nd:
        ss, s = list(source._data.shape), list(self._data.shape)
        if len(ss) != len(s) or any(a != b for i, (a, b) in enumerate(zip(ss, s)) if i != d):
            raise RuntimeError(f"source tensor shape must match self tensor shape, excluding "
                               f"the specified dimension. Got self.shape = {s} source.shape = "
                               f"{ss}")
    n_src = source._data.shape[d] if source._data.ndim else 1
    if index.numel() != n_src:
        raise RuntimeError(f"{fn}(): Number of indices ({index.numel()}) should be equal to "
                           f"source.size(dim): ({n_src}), for dim: {d}")
    if source._dtype is not self._dtype:
        raise RuntimeError(f"{fn}(): self ({tname(self._dtype)}) and source "
                           f"({tname(source._dtype)}) must have the same scalar type")
    idx = index._data.reshape(-1)
    size = self._data.shape[d] if nd else 1
    if idx.size and (idx.max() >= size or idx.min() < 0):
        bad = idx[(idx >= size) | (idx < -size)]
        if not include_self and bad.size:   # (raised by the index_fill_ PyTorch runs first)
            raise IndexError(f"index {bad[0]} is out of bounds for dimension {d} with size "
                             f"{size}")
        raise IndexError("index out of range in self")
    shape = [1] * max(source._data.ndim, 1)
    shape[d] = -1
    idx = index.long().reshape(-1)
    return d, idx.view(shape).expand(tuple(source._data.shape) or (1,))


@per_sample
def index_reduce(input, dim, index, source, reduce, *, include_self=True):
    """As torch.index_reduce: self with the slices of source along dim reduced (prod, mean,
    amax, amin) into the slices at index, self's own values taking part when include_self."""
    d, idx = _index_reduce_args(input, dim, index, source, reduce, "index_reduce_",
                                include_self)
    out = input.scatter_reduce(d, idx, source.reshape(tuple(idx._data.shape)), reduce,
                              include_self=include_self)
    return rename(out, "IndexReduceBackward0")


@per_sample_inplace
def index_reduce_(self, dim, index, source, reduce, *, include_self=True):
    """In-place index_reduce, as torch.Tensor.index_reduce_."""
    d, idx = _index_reduce_args(self, dim, index, source, reduce, "index_reduce_",
                                include_self)
    return rename(self.scatter_reduce_(d, idx, source.reshape(tuple(idx._data.shape)), reduce,
                                       include_self=include_self), "IndexReduceBackward0")


export(index_reduce)
Tensor.index_reduce = index_reduce
Tensor.index_reduce_ = index_reduce_


# ---- the unsafe splits and the *_copy functions ----------------------------------------------

def split(tensor, split_size_or_sections, dim=0):
    """As torch.split: Tensor.split with the function's keywords (the method's is split_size)."""
    return tensor.split(split_size_or_sections, dim)


export(split)


def unsafe_chunk(input, chunks, dim=0):
    """As torch.unsafe_chunk: chunk (PyTorch skips the views' aliasing checks; llgrad's
    results are the same views)."""
    return rename(tuple(input.chunk(chunks, dim)), "UnsafeSplitBackward0")


def unsafe_split(input, split_size, dim=0):
    """As torch.unsafe_split: split (see unsafe_chunk)."""
    if not isinstance(split_size, int):
        return unsafe_split_with_sizes(input, split_size, dim)
    return rename(tuple(input.split(split_size, dim)), "UnsafeSplitBackward0")


def unsafe_split_with_sizes(input, split_sizes, dim=0):
    """As torch.unsafe_split_with_sizes: split_with_sizes (see unsafe_chunk)."""
    return rename(tuple(input.split_with_sizes(split_sizes, dim)),
                  "UnsafeSplitWithSizesBackward0")


for _fn in (unsafe_chunk, unsafe_split, unsafe_split_with_sizes):
    export(_fn)
    setattr(Tensor, _fn.__name__, _fn)


def _copy(view, name, node, multi=False):
    def fn(input, *args, **kwargs):
        _check_tensor(input, name, "input" if name != "view_copy" else "self", 1)
        if name == "narrow_copy" and input.is_sparse:   # (PyTorch keeps the layout and
            # the sparse / dense dims; the strided narrow would densify)
            return input.to_dense().narrow(*args, **kwargs).to_sparse(input.sparse_dim())
        try:
            out = getattr(input, view)(*args, **kwargs)
        except RuntimeError as e:   # (ATen's view_copy reshapes what view cannot: a copy)
            if view != "view" or kwargs or "view size is not compatible" not in str(e):
                raise
            out = input.reshape(*args)
        if isinstance(out, Tensor) and out._dtype is not input._dtype:
            return out.clone()          # (view_copy to another dtype: no gradient)
        if multi:
            return rename(tuple(t.contiguous().clone() for t in out), node + "_copy")
        out = out.clone(memory_format="contiguous_format")
        return rename(out, node if name == "narrow_copy" else
                      (node(args, kwargs) if callable(node) else node) + "_copy")
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"As torch.{name}: Tensor.{view}'s result as a new contiguous tensor."
    export(fn)
    return fn


def _squeeze_node(args, kwargs):
    dim = args[0] if args else kwargs.get("dim")
    return "SqueezeBackward0" if dim is None else \
        "SqueezeBackward1" if isinstance(dim, int) else "SqueezeBackward2"


for _view, _node in (("view", "ViewBackward0"), ("permute", "PermuteBackward0"),
                     ("transpose", "TransposeBackward0"), ("t", "TBackward0"),
                     ("expand", "ExpandBackward0"), ("squeeze", _squeeze_node),
                     ("unsqueeze", "UnsqueezeBackward0"), ("select", "SelectBackward0"),
                     ("diagonal", "DiagonalBackward0"), ("unfold", "UnfoldBackward0"),
                     ("as_strided", "AsStridedBackward0")):
    _copy(_view, _view + "_copy", _node)
Tensor.narrow_copy = _copy("narrow", "narrow_copy", "NarrowCopyBackward0")
_copy("unbind", "unbind_copy", "UnbindBackward0", multi=True)
_copy("split", "split_copy", "SplitBackward0", multi=True)
_copy("split_with_sizes", "split_with_sizes_copy", "SplitWithSizesBackward0", multi=True)


def slice_copy(input, dim=0, start=None, end=None, step=1):
    """As torch.slice_copy: input[..., start:end:step] (at dim) as a new contiguous tensor."""
    if step <= 0:
        raise RuntimeError("slice step must be positive")
    d = norm_dim(dim, input._data.ndim)
    out = input[(slice(None),) * d + (slice(start, end, step),)]
    return rename(out.clone(memory_format="contiguous_format"), "SliceBackward0_copy")


def alias_copy(input):
    """As torch.alias_copy: a copy of input."""
    return rename(input.clone(memory_format="contiguous_format"), "AliasBackward0_copy")


def detach_copy(input):
    """As torch.detach_copy: a copy of input whose backward raises (PyTorch defines no
    derivative for it)."""
    return no_derivative(input.clone(memory_format="contiguous_format"), "detach_copy")


for _fn in (slice_copy, alias_copy, detach_copy):
    export(_fn)


@per_sample
def nonzero_static(input, *, size, fill_value=-1):
    """As torch.nonzero_static: nonzero's (n, ndim) indices cut or padded (with fill_value)
    to exactly size rows."""
    if not isinstance(size, int) or size < 0:
        raise RuntimeError("nonzero_static: 'size' must be an non-negative integer")
    tracer = trace_state.state.tracer
    if tracer is not None:
        tracer.untraceable("nonzero_static (its rows depend on the values)")
    nz = np.argwhere(input._data)[:size]
    out = np.full((size, input._data.ndim), fill_value, dtype=np.int64)
    out[:len(nz)] = nz
    return Tensor._from_array(out)


export(nonzero_static)
Tensor.nonzero_static = nonzero_static
