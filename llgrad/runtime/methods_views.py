"""View methods: results that share storage with their input (indexing, x[...]:
methods_getitem.py)."""
import math

import numpy as np

from ..ir.optable import OPS, method_doc
from ..ir.ops_shape import sum_to_shape
from . import dtypes, trace_state
from .dispatch import call
from .fast_vjp import summed_to
from .shapes import (check_as_strided, infer_shape, norm_dim, norm_dims, unflatten_shape,
                     unpack_shape)
from .tensor import Tensor
from .view_dtype import view_dtype

# (the dispatcher called directly for the commonest views: Tensor._op's layer was ~10% of one)
_UNSQUEEZE, _SELECT = OPS["unsqueeze"], OPS["select"]

def _def(name, fn):
    fn.__name__ = name
    fn.__doc__ = fn.__doc__ or method_doc(name)     # ("As torch.Tensor.<name>.")
    setattr(Tensor, name, fn)


def view(self, *shape, dtype=None):
    """A view with another shape (sharing storage), or of its memory as another dtype, as
    torch.Tensor.view."""
    if dtype is not None or len(shape) == 1 and isinstance(shape[0], dtypes.dtype):
        return view_dtype(self, dtype or shape[0])
    shape = infer_shape(unpack_shape(shape), self._data.size)
    try:
        data = self._data                       # (any shape views a C-contiguous array;
        if type(data) is not np.ndarray or not data.flags.c_contiguous:  # vmap's: tried)
            np.reshape(data, shape, copy=False)
    except ValueError:
        raise RuntimeError("view size is not compatible with input tensor's size and stride (at "
                           "least one dimension spans across two contiguous subspaces). Use "
                           ".reshape(...) instead.") from None
    return self._op("view", shape=shape)


def reshape(self, *shape):
    shape = infer_shape(unpack_shape(shape), self._data.size)
    data = self._data
    if type(data) is np.ndarray and data.flags.c_contiguous:
        # (any shape of its size views a C-contiguous array, which is_contiguous: the view
        # below, without np.reshape's try and the strides read, ~3 us of ~7)
        return self._op("view", shape=shape)
    try:
        np.reshape(self._data, shape, copy=False)
    except ValueError:
        out = self._op("clone", memory_format="contiguous")._op("_unsafe_view", shape=shape)
        out._base = None          # a copy: it aliases only the internal clone, as in PyTorch
        out._creation = None      # (not a view, so no no_grad / inference_mode view either)
        return out
    # viewable: a view of a contiguous tensor (ViewBackward0), else PyTorch's _reshape_alias
    return self._op("view" if self.is_contiguous() else "_reshape_alias", shape=shape)


def transpose(self, dim0, dim1):
    nd = self._data.ndim
    return self._op("transpose", dim0=norm_dim(dim0, nd), dim1=norm_dim(dim1, nd))


def t(self):
    if self._data.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is "
                           f"{self._data.ndim}D")
    return self._op("t")


def permute(self, *dims):
    nd = self._data.ndim
    dims = unpack_shape(dims)
    if len(dims) == nd:         # (the length is checked first: PyTorch's order of errors)
        dims = tuple(norm_dim(d, nd) for d in dims)
    if sorted(dims) != list(range(nd)):
        raise RuntimeError("permute(sparse_coo): number of dimensions in the tensor input does "
                           "not match the length of the desired ordering of dimensions i.e. "
                           f"input.dim() = {nd} is not equal to len(dims) = {len(dims)}"
                           if len(dims) != nd else "permute(): duplicate dims are not allowed.")
    return self._op("permute", dims=dims)


def expand(self, *sizes):
    sizes = list(unpack_shape(sizes))
    shape = self._data.shape
    if len(sizes) < len(shape):
        raise RuntimeError(f"expand(llgrad.{self._dtype._tensor_type}{{{list(shape)}}}, "
                           f"size={sizes}): the number of sizes provided ({len(sizes)}) must be "
                           f"greater or equal to the number of dimensions in the tensor "
                           f"({len(shape)})")
    lead = len(sizes) - len(shape)
    target = list(sizes)
    for i in reversed(range(len(sizes))):     # (PyTorch's order: the last dim first)
        s, n = sizes[i], (shape[i - lead] if i >= lead else 1)
        if s == -1:
            if i < lead:
                raise RuntimeError(f"The expanded size of the tensor (-1) isn't allowed in a "
                                   f"leading, non-existing dimension {i}")
            sizes[i] = n
        elif n != 1 and s != n:
            raise RuntimeError(f"The expanded size of the tensor ({s}) must match the existing "
                               f"size ({n}) at non-singleton dimension {i}.  Target sizes: "
                               f"{target}.  Tensor sizes: {list(shape)}")
    return self._op("expand", size=tuple(sizes))


def squeeze(self, dim=None):
    nd = self._data.ndim
    if dim is not None:
        dim = norm_dim(dim, nd) if isinstance(dim, int) else \
            tuple(norm_dim(d, nd) for d in dim)
        if isinstance(dim, tuple) and len(set(dim)) != len(dim):
            norm_dims(dim, nd)      # (raises PyTorch's "dim 0 appears multiple times")
        if nd == 0:                 # (a 0-d tensor's dim 0 / -1: nothing to squeeze)
            dim = None
    return self._op("squeeze", dim=dim)


def unsqueeze(self, dim):
    return call(_UNSQUEEZE, (self,), {"dim": norm_dim(dim, self._data.ndim + 1)})


def flatten(self, start_dim=0, end_dim=-1):
    nd = self._data.ndim
    s, e = norm_dim(start_dim, nd), norm_dim(end_dim, nd)     # (0-d: as if 1-d, PyTorch's)
    if nd == 0:
        return self.reshape(1)
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    if s == e:
        return self
    shape = self._data.shape
    n = 1                       # (not -1: that is ambiguous when another dim is 0)
    for k in shape[s:e + 1]:
        n *= k
    return self.reshape(shape[:s] + (n,) + shape[e + 1:])


def unflatten(self, dim, sizes):
    d = norm_dim(dim, self._data.ndim)
    shape = self._data.shape
    inner = unflatten_shape(tuple(sizes), shape[d], d)
    return self.view(shape[:d] + inner + shape[d + 1:])


def narrow(self, dim, start, length):
    if not self._data.ndim:
        raise RuntimeError("narrow() cannot be applied to a 0-dim tensor.")
    if isinstance(start, Tensor):
        if start._data.ndim or start._dtype.is_floating_point or start._dtype is dtypes.bool_:
            raise RuntimeError("start must be an 0-dim integral Tensor.")
        start = int(start)
    d = norm_dim(dim, self._data.ndim)
    n = self._data.shape[d]
    if not -n <= start <= n:
        raise IndexError(f"start out of range (expected to be in range of [{-n}, {n}], but got "
                         f"{start})")
    if length < 0:
        raise RuntimeError("narrow(): length must be non-negative.")
    start = start + n if start < 0 else start
    if length > n - start:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({n}).")
    return self._op("slice", dim=d, start=start, end=start + length, step=1)


def select(self, dim, index, method=False):
    if method and not self._data.ndim:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    d = norm_dim(dim, self._data.ndim)
    n = self._data.shape[d]
    if not -n <= index < n:
        if method:      # (Tensor.select's own words; x[i]'s below)
            raise IndexError(f"select(): index {index} out of range for tensor of size "
                             f"{list(self._data.shape)} at dimension {d}")
        raise IndexError(f"index {index} is out of bounds for dimension {d} with size {n}")
    return call(_SELECT, (self,), {"dim": d, "index": index % n})


def unbind(self, dim=0):
    return self._op("unbind", dim=norm_dim(dim, self._data.ndim))


def split(self, split_size, dim=0):
    """As Tensor.split (keyword split_size; llgrad.split's is split_size_or_sections)."""
    split_size_or_sections = split_size
    if not self._data.ndim:
        raise RuntimeError("split expects at least a 1-dimensional tensor")
    d = norm_dim(dim, self._data.ndim)
    n = self._data.shape[d]
    if isinstance(split_size_or_sections, int):
        size = split_size_or_sections
        if size < 0 or (size == 0 and n):
            raise RuntimeError("split_size can only be 0 if dimension size is 0, but got "
                               f"dimension size of {n}" if size == 0 else
                               f"split expects split_size be non-negative, but got split_size={size}")
        sizes = [min(size, n - i) for i in range(0, n, size)] if size > 0 else [n]
        return self._op("split", sizes=tuple(sizes or [0]), dim=d, with_sizes=False)
    sizes = tuple(int(s) for s in split_size_or_sections)
    if any(s < 0 for s in sizes):
        raise RuntimeError("split_with_sizes expects split_sizes have only non-negative entries, "
                           f"but got split_sizes={list(sizes)}")
    if sum(sizes) != n:
        raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {n} (input "
                           f"tensor's size at dimension {d}), but got split_sizes={list(sizes)}")
    return self._op("split", sizes=sizes, dim=d, with_sizes=True)


def chunk(self, chunks, dim=0):
    if not self._data.ndim:
        raise RuntimeError("chunk expects at least a 1-dimensional tensor")
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    n = self._data.shape[norm_dim(dim, self._data.ndim)]
    if n == 0:          # (PyTorch: `chunks` empty pieces, by split_with_sizes)
        return split(self, [0] * chunks, dim)
    return split(self, math.ceil(n / chunks), dim)


def diagonal(self, offset=0, dim1=0, dim2=1):
    nd = self._data.ndim
    return self._op("diagonal", offset=offset, dim1=norm_dim(dim1, nd), dim2=norm_dim(dim2, nd))


def as_strided(self, size, stride, storage_offset=None):
    size, stride = tuple(int(s) for s in size), tuple(int(s) for s in stride)
    offset = self._storage_offset() if storage_offset is None else int(storage_offset)
    if storage_offset is not None and trace_state.state.tracer is not None:
        trace_state.state.tracer.reads_layout(self, "as_strided(..., storage_offset)")
    base = self._storage.base
    check_as_strided(size, stride, offset, base, self._data.itemsize)
    return self._op("as_strided", size=size, stride=stride, storage_offset=offset,
                    in_strides=self.stride(), in_offset=self._storage_offset())


def swapaxes(self, axis0, axis1):
    """transpose by PyTorch's names for swapaxes (x.swapaxes(axis0=0, axis1=1))."""
    return transpose(self, axis0, axis1)


for _n, _f in (("view", view), ("reshape", reshape), ("transpose", transpose),
               ("swapaxes", swapaxes), ("t", t), ("permute", permute), ("expand", expand),
               ("squeeze", squeeze), ("unsqueeze", unsqueeze), ("flatten", flatten),
               ("unflatten", unflatten), ("narrow", narrow), ("unbind", unbind), ("split", split), ("chunk", chunk), ("diagonal", diagonal),
               ("as_strided", as_strided)):
    _def(_n, _f)
_def("select", lambda self, dim, index: select(self, dim, index, True))
_def("view_as", lambda self, other: view(self, other._data.shape))
_def("reshape_as", lambda self, other: reshape(self, other._data.shape))
_def("expand_as", lambda self, other: expand(self, other._data.shape))
_def("broadcast_to", lambda self, size: expand(self, tuple(size)))
def _mT(self):
    """The last two dimensions swapped (a view), as torch.Tensor.mT."""
    if self._data.ndim == 0:
        return self._op("alias")        # (PyTorch: the identity, deprecated)
    if self._data.ndim < 2:
        raise RuntimeError("tensor.mT is only supported on matrices or batches of matrices. "
                           f"Got {self._data.ndim}-D tensor.")
    return transpose(self, -2, -1)


Tensor.mT = property(_mT)


def sum_to_size(self, *size):
    shape = unpack_shape(size)
    # (to (): summed, as PyTorch's sum_to, an int 0-d self too; else a bias's gradient)
    fast = self.sum() if not shape else summed_to(self, shape)
    return sum_to_shape(self, shape) if fast is None else fast


_def("sum_to_size", sum_to_size)
