"""Sparse COO tensors (layout llgrad.sparse_coo), as torch's: a Tensor whose payload is
indices (int64, [sparse_dim, nnz]) and values ([nnz, *dense dims]) rather than a strided
buffer. What PyTorch programs do with them keeps the sparse form (products with dense
matrices, coalesce, to_dense, transpose, scaling, sums of sparse tensors; functions_sparse.py);
any other op reads the dense matrix the entries make, read-only, and gives a strided result
with PyTorch's numbers. The sparse operations are compositions of the op table's ops
(index_select, mul, index_add, index_put), so gradients reach the values and the dense
operands, eagerly and in a trace."""
import math

import numpy as np

from . import dtypes, functions, grad_mode, node as _node, trace_state
from .creation import zeros
from .formatting import add_suffixes, array_text
from .node_names import rename
from .size import Size
from .tensor import Storage, Tensor


# the in-place names a sparse tensor answers (the rest would write its read-only dense reading)
_IN_PLACE_KEPT = frozenset(("mul_", "div_", "zero_", "add_", "sub_", "requires_grad_",
                            "share_memory_"))


def _written(t, what):
    """Before an in-place write of sparse tensor t: in a trace, a graph break (compiled code
    takes a sparse tensor's entries as inputs, llgrad.compile's guards.py, and cannot give
    back its new ones)."""
    tracer = trace_state.state.tracer
    if tracer is not None:
        tracer.graph_break(f"{what} writes a sparse tensor in place")


def _index_tensor(arr):
    return Tensor._from_array(np.ascontiguousarray(arr, dtype=np.int64))


class SparseCOOTensor(Tensor):
    """A tensor in PyTorch's sparse COO layout (as torch.sparse_coo_tensor makes): entries
    at the columns of indices ([sparse_dim, nnz]) with values ([nnz, *dense dims]); duplicate
    entries add up, coalesce() sorts and sums them. Operations without a sparse form in
    llgrad see the dense tensor (a strided result); writes other than mul_ / div_ / zero_
    raise. A sparse tensor requiring grad is a leaf whose grad is sparse (torch.sparse.mm's)."""

    def __getattribute__(self, name):
        if name[-1] == "_" and name[0] != "_" and name not in _IN_PLACE_KEPT:
            raise NotImplementedError(f"llgrad: {name} of a sparse tensor (in place, llgrad "
                                      f"writes only add_, sub_, mul_, div_ and zero_ to one)")
        return object.__getattribute__(self, name)

    @classmethod
    def _make(cls, indices, values, size, coalesced):
        t = object.__new__(cls)
        t._sp_indices, t._sp_values = indices, values
        t._sp_size, t._sp_coalesced = tuple(int(n) for n in size), coalesced
        t._dtype = values._dtype
        t._requires_grad = t._retains_grad = t._multi_view = False
        t._grad = t._grad_fn = t._base = t._hooks = t._acc = None
        t._output_nr = t._view_version = 0
        t._inference = values._inference
        return t

    # ---- the dense reading every op without a sparse form gets ----------------------------
    def _dense_array(self):
        v = self._sp_values._data
        out = np.zeros(self._sp_size, v.dtype)
        np.add.at(out, tuple(self._sp_indices._data), v)      # (duplicates add up)
        return out

    @property
    def _data(self):
        key = (self._sp_values._storage.version, self._sp_indices._storage.version)
        cached = self.__dict__.get("_dense")
        if cached is None or cached[0] != key:
            if self._sp_values.requires_grad and grad_mode.state.grad_enabled:
                raise NotImplementedError(
                    "llgrad: this operation has no sparse form, and on the dense values it "
                    "would not reach the gradient of the sparse tensor's values: call "
                    ".to_dense() first")
            dense = self._dense_array()
            dense.flags.writeable = False       # (a write would not reach the entries)
            cached = self.__dict__["_dense"] = (key, dense, Storage(dense))
        return cached[1]

    @_data.setter
    def _data(self, value):
        # (llgrad.compile's snapshot puts back every field it read; the dense reading is not
        # the sparse tensor's to write: the entries, in __dict__, are put back instead)
        if value is not self.__dict__.get("_dense", (None, None))[1]:
            raise AttributeError("llgrad: a sparse tensor's dense reading cannot be set")

    @property
    def _storage(self):
        self._data
        return self.__dict__["_dense"][2]

    @_storage.setter
    def _storage(self, value):
        if value is not self.__dict__.get("_dense", (None, None, None))[2]:
            raise AttributeError("llgrad: a sparse tensor's dense reading cannot be set")

    # ---- metadata ----------------------------------------------------------------------------
    @property
    def shape(self):
        """The size of each dimension (as torch.Tensor.shape)."""
        return Size(self._sp_size)

    def size(self, dim=None):
        """The shape, or the size of dimension dim (as torch.Tensor.size)."""
        return Size(self._sp_size) if dim is None else self._sp_size[dim]

    def dim(self):
        """The number of dimensions, sparse and dense (as torch.Tensor.dim)."""
        return len(self._sp_size)

    ndim = property(dim, doc="The number of dimensions (as torch.Tensor.ndim).")

    def numel(self):
        """The number of elements of the dense tensor (as torch.Tensor.numel)."""
        return math.prod(self._sp_size)

    def __len__(self):
        if not self._sp_size:
            raise TypeError("len() of a 0-d tensor")
        return self._sp_size[0]

    layout = property(lambda self: functions.sparse_coo, doc="llgrad.sparse_coo.")
    is_sparse = property(lambda self: True, doc="True: a sparse COO tensor.")

    def stride(self, dim=None):
        """Zeros, as torch's: a sparse tensor has no strides of its own."""
        return 0 if dim is not None else (0,) * len(self._sp_size)

    def is_contiguous(self, memory_format=None):
        """False, as torch's for a sparse tensor."""
        return False

    def data_ptr(self):
        """Raises, as torch's: a sparse tensor has no storage of its own."""
        raise RuntimeError("Cannot access data pointer of Tensor that doesn't have storage")

    def numpy(self, force=False):
        """Raises, as torch's: to_dense() first."""
        raise TypeError("can't convert Sparse layout tensor to numpy. Use Tensor.to_dense() "
                        "first.")

    def _nnz(self):
        return self._sp_values._data.shape[0]

    def sparse_dim(self):
        """The number of sparse dimensions (rows of indices), as torch.Tensor.sparse_dim."""
        return self._sp_indices._data.shape[0]

    def dense_dim(self):
        """The number of dense dimensions (of each value), as torch.Tensor.dense_dim."""
        return self._sp_values._data.ndim - 1

    def _indices(self):
        return self._sp_indices

    def _values(self):
        return self._sp_values

    def indices(self):
        """The indices of a coalesced tensor (as torch.Tensor.indices)."""
        self._need_coalesced("indices")
        return self._sp_indices

    def values(self):
        """The values of a coalesced tensor (as torch.Tensor.values)."""
        self._need_coalesced("values")
        return self._sp_values

    def _need_coalesced(self, what):
        if not self._sp_coalesced:
            raise RuntimeError(f"Cannot get {what} on an uncoalesced tensor, please call "
                               ".coalesce() first")

    def is_coalesced(self):
        """Whether the entries are sorted with no duplicates (as torch.Tensor.is_coalesced)."""
        return self._sp_coalesced

    def coalesce(self):
        """The same tensor with its entries sorted and duplicates summed (as
        torch.Tensor.coalesce)."""
        if self._sp_coalesced:
            return self
        idx, values = self._sp_indices._data, self._sp_values
        sd = idx.shape[0]
        if idx.shape[1] == 0:
            return SparseCOOTensor._make(self._sp_indices, values, self._sp_size, True)
        flat = np.ravel_multi_index(tuple(idx), self._sp_size[:sd])
        unique, inverse = np.unique(flat, return_inverse=True)
        out_idx = _index_tensor(np.stack(np.unravel_index(unique, self._sp_size[:sd])))
        summed = zeros((len(unique),) + values.shape[1:], dtype=values.dtype).index_add(
            0, _index_tensor(inverse.reshape(-1)), values)
        return SparseCOOTensor._make(out_idx, rename(summed, "CoalesceBackward0"),
                                     self._sp_size, True)

    def to_dense(self, dtype=None, *, masked_grad=None):
        """The strided tensor of the entries, duplicates summed (as torch.Tensor.to_dense);
        differentiable to the values."""
        values = self._sp_values
        if values.requires_grad and grad_mode.state.grad_enabled:
            index = tuple(_index_tensor(row) for row in self._sp_indices._data)
            out = rename(zeros(self._sp_size, dtype=values.dtype).index_put(
                index, values, accumulate=True), "ToDenseBackward0")
        else:
            out = Tensor._from_array(self._dense_array())
        return out if dtype is None else out.to(dtype)

    def to_sparse(self, *args, **kwargs):
        """self: already sparse COO."""
        return self

    to_sparse_coo = to_sparse

    # ---- autograd: a leaf's gradient lives on its values ----------------------------------
    @property
    def requires_grad(self):
        """Whether the values require grad."""
        return self._sp_values.requires_grad

    @requires_grad.setter
    def requires_grad(self, flag):
        self.requires_grad_(flag)

    def requires_grad_(self, requires_grad=True):
        """Make this sparse tensor a leaf that requires grad (its grad is sparse)."""
        self._sp_values.requires_grad_(requires_grad)
        return self

    @property
    def grad(self):
        """The sparse gradient of a leaf: its entries' gradients (torch.sparse.mm's)."""
        g = self._sp_values.grad
        if g is None or self._sp_coalesced:
            return None if g is None else SparseCOOTensor._make(self._sp_indices, g,
                                                                self._sp_size, True)
        idx = self._sp_indices._data        # (each duplicate holds its position's gradient)
        sd = idx.shape[0]
        flat = np.ravel_multi_index(tuple(idx), self._sp_size[:sd])
        unique, first = np.unique(flat, return_index=True)
        return SparseCOOTensor._make(
            _index_tensor(np.stack(np.unravel_index(unique, self._sp_size[:sd]))),
            Tensor._from_array(g._data[first]), self._sp_size, True)

    @grad.setter
    def grad(self, value):
        if value is not None:
            raise NotImplementedError("llgrad: setting the grad of a sparse tensor")
        self._sp_values.grad = None

    grad_fn = property(lambda self: self._sp_values.grad_fn, doc="The values' grad_fn.")
    is_leaf = property(lambda self: self._sp_values.is_leaf, doc="Whether the values are a leaf.")

    def detach(self):
        """The same entries without autograd history."""
        return SparseCOOTensor._make(self._sp_indices, self._sp_values.detach(), self._sp_size,
                                     self._sp_coalesced)

    def clone(self, *, memory_format=None):
        """A copy of the entries (as torch.Tensor.clone)."""
        return SparseCOOTensor._make(self._sp_indices.clone(), self._sp_values.clone(),
                                     self._sp_size, self._sp_coalesced)

    def __repr__(self):
        indent = len("tensor(")
        suffixes = [f"size={self._sp_size}", f"nnz={self._nnz()}"]
        if self._dtype.name not in ("int64", "bool", dtypes.get_default_dtype().name):
            suffixes.append(f"dtype=llgrad.{self._dtype.name}")
        suffixes.append("layout=llgrad.sparse_coo")
        fn = self.grad_fn
        if fn is not None:
            suffixes.append(f"grad_fn=<{type(fn).__name__}>")
        elif self.requires_grad:
            suffixes.append("requires_grad=True")
        parts = []
        for name, t in (("indices", self._sp_indices), ("values", self._sp_values)):
            prefix = f"{name}=tensor("
            text = array_text(t._data, t._dtype, indent + len(prefix))
            if t._data.size == 0:
                text += f", size={tuple(t._data.shape)}"
            parts.append(prefix + text + ")")
        body = "tensor(" + (",\n" + " " * indent).join(parts)
        return add_suffixes(body + ",\n" + " " * indent + suffixes[0], suffixes[1:], indent)

    __str__ = __repr__

    def __reduce_ex__(self, proto):
        return (_rebuild_sparse, (np.array(self._sp_indices._data),
                                  np.array(self._sp_values._data), self._sp_size,
                                  self._sp_coalesced, self.requires_grad))


def accumulate_sparse(leaf, old, g):
    """AccumulateGrad where the gradient g or the leaf's .grad (old) is sparse, as PyTorch's:
    a first sparse gradient becomes .grad; a sparse .grad takes g's entries in place
    (sparse_add.py's merge); a dense .grad gets a sparse g's entries added in place, one by
    one; a dense g and a sparse .grad make a dense .grad, g + old."""
    with grad_mode.no_grad():
        if old is None:     # (non-contiguous values are copied, as PyTorch's clone)
            leaf._grad = g.detach() if g._sp_values.is_contiguous() else g.detach().clone()
        elif type(old) is SparseCOOTensor and type(g) is SparseCOOTensor:
            old.add_(g.detach())        # (PyTorch's merge of the two entry lists)
        elif type(old) is SparseCOOTensor:
            leaf._grad = g + old
        else:
            old.add_(g)                 # (g's entries one by one, in place)


_node.accumulate_sparse = accumulate_sparse


def _rebuild_sparse(indices, values, size, coalesced, requires_grad):
    v = Tensor._from_array(values)
    v._requires_grad = requires_grad
    return SparseCOOTensor._make(Tensor._from_array(indices), v, size, coalesced)
