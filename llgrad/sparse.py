"""llgrad.sparse: torch.sparse's functions over llgrad's sparse COO tensors
(runtime/sparse_coo.py): mm and addmm (a sparse matrix times a dense one, with the sparse
operand's gradient sparse), sum."""
from .runtime.functions_sparse import _sparse_dense
from .runtime.sparse_coo import SparseCOOTensor
from .runtime.tensor import Tensor

__all__ = ["addmm", "mm", "sum"]


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
