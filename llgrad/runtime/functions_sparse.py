"""What PyTorch programs compute with sparse COO tensors (sparse_coo.py), keeping the sparse
form as torch does: llgrad.sparse_coo_tensor, Tensor.to_sparse, products with dense matrices
(mm, matmul, @, spmm, torch.sparse.mm / addmm, and a dense matrix times a sparse one), scaling
and sums of sparse tensors, transpose. A product is index_select, mul and index_add of the
entries in coalesced order (PyTorch's order of accumulation), differentiable to the dense
operand and to the values."""
import numbers

import numpy as np

from . import dtypes, functions, trace_state
from .creation import tensor as _tensor, zeros
from .dispatch import scalar_type_name as tname
from .functions import export
from .node_names import rename
from .sparse_add import dense_add_sparse, sparse_add_, sparse_sum
from .sparse_coo import SparseCOOTensor, _index_tensor, _written
from .tensor import Tensor

_make = SparseCOOTensor._make


def _leaves_graph(t, what):
    """Sparse tensors live outside compiled code: one made in a trace ends it (eagerly)."""
    tracer = trace_state.state.tracer
    if tracer is not None:
        tracer.reads_out(t, what)


def sparse_coo_tensor(indices, values, size=None, *, dtype=None, device=None, pin_memory=False,
                      requires_grad=False, check_invariants=None, is_coalesced=None):
    """As torch.sparse_coo_tensor: entries at the columns of indices ([sparse_dim, nnz]) with
    values ([nnz, *dense dims]); size defaults to the largest index + 1 in each sparse dim.
    The indices are always checked against size."""
    idx = indices if isinstance(indices, Tensor) else _tensor(np.asarray(indices))
    vals = values if isinstance(values, Tensor) else _tensor(values)
    _leaves_graph(idx, "sparse_coo_tensor")
    if idx.dim() != 2:
        raise RuntimeError(f"indices must be sparse_dim x nnz, but got: {list(idx.shape)}")
    sd, nnz = idx.shape
    if vals.dim() == 0 or vals.shape[0] != nnz:
        raise RuntimeError(f"indices and values must have same nnz, but got nnz from indices: "
                           f"{nnz}, nnz from values: {vals.shape[0] if vals.dim() else 1}")
    arr = idx._data.astype(np.int64)        # (PyTorch converts float and bool indices too)
    if size is None:
        size = tuple(int(m) + 1 for m in (arr.max(1) if nnz else [0] * sd)) + \
            tuple(vals.shape[1:])
    size = tuple(int(n) for n in size)
    if len(size) != sd + vals.dim() - 1:
        raise RuntimeError(f"number of dimensions must be sparse_dim ({sd}) + dense_dim "
                           f"({vals.dim() - 1}), but got {len(size)}")
    if tuple(size[sd:]) != tuple(vals.shape[1:]):
        want = [nnz] + list(size[sd:])
        raise RuntimeError(f"values has incorrect size, expected {want}, got "
                           f"{list(vals.shape)}")
    if nnz:
        if arr.min() < 0:
            raise RuntimeError("found negative index " + str(int(arr.min())) + " for dim " +
                               str(int(np.argmin(arr.min(1)))))
        for d in range(sd):
            if arr[d].max() >= size[d]:
                raise RuntimeError(f"size is inconsistent with indices: for dim {d}, size is "
                                   f"{size[d]} but found index {int(arr[d].max())}")
    if dtype is not None and dtype is not vals._dtype:
        vals = vals.to(dtype)
    if requires_grad:
        vals = vals.detach().requires_grad_(True)
    coalesced = bool(is_coalesced) if is_coalesced is not None else nnz <= 1
    return _make(_index_tensor(arr), vals, size, coalesced)


def to_sparse(self, sparse_dim=None, *, layout=None, blocksize=None, dense_dim=None):
    """As torch.Tensor.to_sparse: the nonzero entries (in the first sparse_dim dims, all by
    default; a row of the rest that is not all zero is an entry), coalesced."""
    if layout not in (None, functions.sparse_coo):
        raise NotImplementedError(f"llgrad has only the sparse COO layout, not {layout}")
    _leaves_graph(self, "to_sparse()")
    sd = self.dim() if sparse_dim is None else sparse_dim
    if not 0 < sd <= self.dim():
        raise RuntimeError(f"sparse_dim must be in [1, {self.dim()}], got {sd}")
    data = self._data
    mask = data != 0 if sd == data.ndim else (data != 0).reshape(data.shape[:sd] + (-1,)).any(-1)
    where = np.nonzero(mask)                      # (row-major: already coalesced)
    index = _index_tensor(np.stack(where) if where else np.zeros((sd, 0)))
    flat = self.reshape((-1,) + tuple(self.shape[sd:]))
    rows = np.ravel_multi_index(where, data.shape[:sd]) if data.size else np.zeros(0, np.int64)
    values = flat.index_select(0, _index_tensor(rows))
    return _make(index, values, self.shape, True)


def _check_mm(s, d, what):
    if s.sparse_dim() != 2 or s.dense_dim() != 0:
        raise NotImplementedError(f"llgrad: {what} of a sparse tensor with {s.sparse_dim()} "
                                  f"sparse and {s.dense_dim()} dense dims")
    if not isinstance(d, Tensor) or d.dim() not in (1, 2):
        raise RuntimeError(f"{what}: expected a dense matrix or vector, got "
                           f"{getattr(d, 'shape', type(d).__name__)}")
    if d.shape[0] != s._sp_size[1]:
        raise RuntimeError(f"addmm: Argument #3 (dense): Expected dim 0 size {s._sp_size[1]}, "
                           f"got {d.shape[0]}")
    if d._dtype is not s._dtype:
        raise RuntimeError(f"expected scalar type {tname(s._dtype)} but found "
                           f"{tname(d._dtype)}")


def _sparse_dense(s, d, what, grad_name):
    """s @ d for a 2-D sparse s and a dense matrix (or vector) d: out[i] += v * d[j] over the
    entries (i, j, v) in coalesced order."""
    if type(d) is SparseCOOTensor:
        return to_sparse(_sparse_dense(s, d.to_dense(), what, grad_name))
    _check_mm(s, d, what)
    if s.requires_grad and what != "torch.sparse.mm":
        raise NotImplementedError(f"llgrad: the gradient of {what} for a sparse operand that "
                                  "requires grad is dense in PyTorch, which llgrad does not "
                                  "compute; torch.sparse.mm gives the sparse gradient")
    vector = d.dim() == 1
    dd = d.unsqueeze(1) if vector else d
    c = s.coalesce()
    rows, cols = (_index_tensor(r) for r in c._sp_indices._data)
    products = c._sp_values.unsqueeze(1) * dd.index_select(0, cols)
    out = zeros((s._sp_size[0], dd.shape[1]), dtype=d.dtype).index_add(0, rows, products)
    out = rename(out, grad_name)
    return out.squeeze(1) if vector else out


def _dense_sparse(d, s, what):
    """d @ s for a dense d and a 2-D sparse s: (s^T @ d^T)^T, a transposed view as torch's."""
    if d.dim() == 1:
        return _sparse_dense(transpose(s, 0, 1), d, what, "MmBackward0")
    return _sparse_dense(transpose(s, 0, 1), d.t(), what, "MmBackward0").t()


def transpose(s, dim0=0, dim1=1):
    """s with two sparse dims swapped (rows of its indices); dense dims densify."""
    sd = s.sparse_dim()
    d0, d1 = (d + s.dim() if d < 0 else d for d in (dim0, dim1))
    if max(d0, d1) >= sd:
        return Tensor.transpose(s, dim0, dim1)
    order = list(range(sd))
    order[d0], order[d1] = d1, d0
    size = list(s._sp_size)
    size[d0], size[d1] = size[d1], size[d0]
    return _make(_index_tensor(s._sp_indices._data[order]), s._sp_values, size,
                 s._sp_coalesced and sd == 1)


def _scalar(x):
    return isinstance(x, numbers.Number) or (isinstance(x, Tensor) and type(x) is not
                                             SparseCOOTensor and x.dim() == 0)


def _mul(s, other):
    if _scalar(other):
        return _make(s._sp_indices, s._sp_values * other, s._sp_size, s._sp_coalesced)
    if isinstance(other, Tensor) and type(other) is not SparseCOOTensor and \
            tuple(other.shape) == s._sp_size:
        picked = other[tuple(_index_tensor(r) for r in s._sp_indices._data)]
        return _make(s._sp_indices, s._sp_values * picked, s._sp_size, s._sp_coalesced)
    return s.to_dense() * (other.to_dense() if type(other) is SparseCOOTensor else other)


def _add(s, other, alpha=1):
    if type(other) is SparseCOOTensor and other._sp_size == s._sp_size:
        return sparse_sum(s, other, alpha)
    if isinstance(other, Tensor) and type(other) is not SparseCOOTensor and other.dim():
        raise RuntimeError("add(sparse, dense) is not supported. Use add(dense, sparse) "
                           "instead.")
    if type(other) is SparseCOOTensor:
        other = other.to_dense()
    return s.to_dense().add(other, alpha=alpha)


def _in_place(name):
    def method(self, other):
        if not _scalar(other):
            raise NotImplementedError(f"llgrad: sparse {name} by a non-scalar")
        _written(self, f"{name}_")
        self._sp_values = getattr(self._sp_values, name)(other)
        self._dtype = self._sp_values._dtype
        return self
    method.__name__ = name + "_"
    method.__doc__ = f"As torch.Tensor.{name}_ of a sparse tensor by a number: on the values."
    return method


def _zero(self):
    """Drop every entry (as torch.Tensor.zero_ of a sparse tensor)."""
    _written(self, "zero_")
    self._sp_indices = _index_tensor(np.zeros((self.sparse_dim(), 0)))
    self._sp_values = self._sp_values[:0].detach()
    self._sp_coalesced = True
    return self


def _to(self, *args, **kwargs):
    dtype = kwargs.get("dtype")
    for a in args + tuple(v for k, v in kwargs.items() if k == "device"):
        if isinstance(a, dtypes.dtype):
            dtype = a
        elif isinstance(a, Tensor):
            dtype = a.dtype
        elif str(a).split(":")[0] != "cpu":
            raise RuntimeError(f"llgrad has only the CPU device, not {a}")
    if dtype is None or dtype is self._dtype:
        return self
    return _make(self._sp_indices, self._sp_values.to(dtype), self._sp_size, self._sp_coalesced)


def _sum(self, dim=None, keepdim=False, *, dtype=None):
    if dim is None:
        return self._sp_values.sum(dtype=dtype)
    return self.to_dense().sum(dim, keepdim, dtype=dtype)


def sparse_mask(self, mask):
    """As torch.Tensor.sparse_mask: self's values at the entries of the sparse tensor mask
    (mask's indices as they are, duplicates too)."""
    if type(mask) is not SparseCOOTensor:
        raise RuntimeError("sparse_mask expects mask to be sparse COO")
    if tuple(self.shape) != mask._sp_size:
        raise RuntimeError(f"sparse_mask(): operands have incompatible sizes; self has size "
                           f"{list(self.shape)} but mask has size {list(mask._sp_size)}.")
    picked = self[tuple(_index_tensor(r) for r in mask._sp_indices._data)]
    return _make(mask._sp_indices, picked, mask._sp_size, mask._sp_coalesced)


def _other_layout(name):
    def method(self, *args, **kwargs):
        raise NotImplementedError(f"llgrad has the strided and sparse COO layouts only: "
                                  f"Tensor.{name} is not there")
    method.__name__ = name
    method.__doc__ = f"Raises: llgrad has no {name[3:]} layout."
    return method


def spmm(input, mat2):
    """As torch.spmm: a sparse matrix times a dense one (torch.mm)."""
    return input.mm(mat2)


export(sparse_coo_tensor)
export(spmm)
Tensor.to_sparse, Tensor.sparse_mask = to_sparse, sparse_mask
for _name in ("to_sparse_csr", "to_sparse_csc", "to_sparse_bsr", "to_sparse_bsc"):
    setattr(Tensor, _name, _other_layout(_name))
Tensor.to_sparse_coo = lambda self: to_sparse(self)
Tensor.to_sparse_coo.__doc__ = "As torch.Tensor.to_sparse_coo: to_sparse()."

_S = SparseCOOTensor
_S.mm = lambda self, mat2: _sparse_dense(self, mat2, "torch.mm", "MmBackward0")
_S.matmul = _S.__matmul__ = _S.mm
# dense @ sparse: Python asks the subclass's reflected method first; llgrad.mm(dense, sparse)
# and a Parameter @ sparse multiply by the dense reading (the same numbers; no check of the
# second operand on every dense product's path)
_S.__rmatmul__ = lambda self, other: _dense_sparse(other, self, "torch.mm")
_S.t = lambda self: transpose(self, 0, 1)
_S.transpose = transpose
_S.mul = _S.__mul__ = _S.__rmul__ = _mul
_S.div = _S.__truediv__ = lambda self, other: (
    _make(self._sp_indices, self._sp_values / other, self._sp_size, self._sp_coalesced)
    if _scalar(other) else self.to_dense() / other)
_S.neg = _S.__neg__ = lambda self: _mul(self, -1)
_S.add = _S.__add__ = _add
_S.__radd__ = lambda self, other: (dense_add_sparse("add", other, self, 1)
                                   if isinstance(other, Tensor) else _add(self, other))
_S.sub = _S.__sub__ = lambda self, other, alpha=1: _add(self, other, -alpha)
_S.__rsub__ = lambda self, other: _add(_mul(self, -1), other)
_S.mul_, _S.div_, _S.zero_ = _in_place("mul"), _in_place("div"), _zero
_S.add_ = sparse_add_
_S.sub_ = lambda self, other, alpha=1: sparse_add_(self, other, -alpha)
_S.to, _S.sum = _to, _sum
_S.cpu = lambda self, *args, **kwargs: self
for _name, _dt in (("float", dtypes.float32), ("double", dtypes.float64),
                   ("half", dtypes.float16), ("long", dtypes.int64), ("int", dtypes.int32),
                   ("bool", dtypes.bool_)):
    setattr(_S, _name, (lambda dt: lambda self, memory_format=None: _to(self, dt))(_dt))
