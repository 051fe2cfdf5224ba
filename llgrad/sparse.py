"""llgrad.sparse: torch.sparse's functions over llgrad's sparse COO tensors
(runtime/sparse_coo.py): mm and addmm (a sparse matrix times a dense one, with the sparse
operand's gradient sparse), sum, softmax and log_softmax (over the specified entries: the
unspecified ones are -inf, the result has the input's entries)."""
import numpy as np

from .runtime.creation import zeros
from .runtime.functions_sparse import _sparse_dense
from .runtime.node_names import rename
from .runtime.sparse_coo import SparseCOOTensor, _index_tensor
from .runtime.tensor import Tensor

__all__ = ["addmm", "log_softmax", "mm", "softmax", "sum"]


def mm(mat1, mat2, reduce="sum"):
    """As torch.sparse.mm: mat1 @ mat2 with mat1 sparse (its gradient sparse: the dense
    gradient at its entries); a dense mat1 is torch.mm."""
    if reduce != "sum":
        raise NotImplementedError(f"llgrad: torch.sparse.mm with reduce={reduce!r}")
    if type(mat1) is not SparseCOOTensor:
        return mat1.mm(mat2)
    return _sparse_dense(mat1, mat2, "torch.sparse.mm", "SparseAddmmBackward0")


def addmm(mat, mat1, mat2, *, beta=1.0, alpha=1.0):
    """As torch.sparse.addmm: beta * mat + alpha * (mat1 @ mat2), mat1 sparse."""
    return mat * beta + mm(mat1, mat2) * alpha


def sum(input, dim=None, dtype=None):
    """As torch.sparse.sum: the sum of the entries (a 0-d tensor), or over dims dim."""
    if not isinstance(input, Tensor):
        raise TypeError(f"sum(): argument 'input' must be Tensor, not {type(input).__name__}")
    if type(input) is not SparseCOOTensor:
        return input.sum(dim, dtype=dtype) if dim is not None else input.sum(dtype=dtype)
    return input.sum(dim, dtype=dtype)


def _softmax(input, dim, dtype, log, what):
    if type(input) is not SparseCOOTensor:
        raise NotImplementedError(f"Could not run 'aten::_sparse_{what}' with arguments from "
                                  "the 'CPU' backend: the input must be a sparse COO tensor")
    ndim = len(input.shape)
    if not -ndim <= dim < ndim:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-ndim}, "
                         f"{ndim - 1}], but got {dim})")
    dim %= ndim
    c = input.coalesce()
    values = c._sp_values if dtype is None else c._sp_values.to(dtype)
    sd = c.sparse_dim()
    if dim >= sd:               # (a dense dim: each entry's values on their own)
        out = values.log_softmax(dim - sd + 1) if log else values.softmax(dim - sd + 1)
    else:                       # (the entries that share the other sparse indices: a group)
        idx = c._sp_indices._data
        others = [d for d in range(sd) if d != dim]
        key = (np.ravel_multi_index(tuple(idx[others]), [c.shape[d] for d in others])
               if others else np.zeros(idx.shape[1], np.int64))
        _, group = np.unique(key, return_inverse=True)
        group = _index_tensor(group.reshape(-1))
        n = int(group._data.max()) + 1 if group._data.size else 0
        expand = group.view(-1, *[1] * (values.dim() - 1)).expand(values.shape)
        big = zeros((n,) + tuple(values.shape[1:]), dtype=values.dtype).scatter_reduce(
            0, expand, values.detach(), "amax", include_self=False)
        shifted = values - big.index_select(0, group)
        total = zeros(big.shape, dtype=values.dtype).index_add(0, group, shifted.exp())
        out = (shifted - total.log().index_select(0, group) if log
               else shifted.exp() / total.index_select(0, group))
    name = "SparseLogSoftmaxBackward0" if log else "SparseSoftmaxBackward0"
    out = rename(out, name) if out.requires_grad else out
    return SparseCOOTensor._make(c._sp_indices, out, c._sp_size, True)


def softmax(input, dim, *, dtype=None):
    """As torch.sparse.softmax: the softmax along dim over the specified entries (the
    unspecified ones count as -inf), a sparse tensor with the (coalesced) input's entries."""
    return _softmax(input, dim, dtype, False, "softmax")


def log_softmax(input, dim, *, dtype=None):
    """As torch.sparse.log_softmax: the log of softmax's values, on the same entries."""
    return _softmax(input, dim, dtype, True, "log_softmax")
