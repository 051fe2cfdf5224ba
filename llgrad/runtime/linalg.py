"""Norms: llgrad.linalg.vector_norm / matrix_norm / norm, llgrad.norm and Tensor.norm, as
PyTorch writes them over its one vector-norm op (linalg_vector_norm, llgrad/ir/ops_linalg.py)
and amax/amin; the matrix norms of ord 2, -2 and 'nuc' over the singular values of the SVD op
(llgrad/ir/ops_linalg_spectral.py)."""
import math
import numbers

from ..ir import OPS
from . import dtypes
from .dispatch import call
from .dispatch import scalar_type_name as tname
from .functions import _method_fn
from .shapes import norm_dim
from .tensor import Tensor


def _dims(x, dim):
    nd = x._data.ndim
    if dim is None or (not isinstance(dim, int) and len(dim) == 0):
        return None
    if isinstance(dim, int):
        d = norm_dim(dim, nd)       # (checked for a 0-d x too: its dim 0 / -1 is all of it)
        return (d,) if nd else None
    dims = tuple(sorted(norm_dim(d, nd) for d in dim))
    if len(set(dims)) != len(dims):
        d = next(d for i, d in enumerate(dims) if d in dims[:i])
        raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
    return dims if nd else None


def vector_norm(input, ord=2, dim=None, keepdim=False, *, dtype=None, out=None):
    """The ord-norm of x over dim (all elements by default), as torch.linalg.vector_norm."""
    if not isinstance(ord, (numbers.Number, Tensor)):
        raise TypeError("linalg_vector_norm(): argument 'ord' must be Number, not "
                        f"{type(ord).__name__}")
    if input._dtype.is_complex:     # (a complex norm is its magnitudes': |z| has a gradient)
        return vector_norm(input.abs(), ord, dim, keepdim, dtype=dtype, out=out)
    if not input._dtype.is_floating_point:
        raise RuntimeError("linalg.vector_norm: Expected a floating point or complex tensor as "
                           f"input. Got {tname(input._dtype)}")
    if dtype is not None:
        d = dtypes.to_dtype(dtype)
        if d.itemsize < input._dtype.itemsize or not d.is_floating_point:
            raise RuntimeError(f"linalg.vector_norm: the dtype of the input ({tname(input._dtype)}) "
                               f"should be convertible without narrowing to the specified dtype "
                               f"({tname(d)})")
        input = input.to(d)
    dims = _dims(input, dim)
    ord = float(ord)
    if (math.isinf(ord) or ord < 0) and input._data.size == 0:     # (max, min: no identity)
        name = f"{ord:g}"
        if dims is None:
            raise RuntimeError(f"linalg.vector_norm cannot compute the {name} norm on an empty "
                               "tensor because the operation does not have an identity")
        for d in [dim] if isinstance(dim, int) else dim:    # (as given; PyTorch's words)
            if input._data.shape[d] == 0:
                raise RuntimeError(f"linalg.vector_norm cannot compute the {name} norm on the "
                                   f"dimension {d}because this dimension is empty and the "
                                   "operation does not have an identity")
    return call(OPS["linalg_vector_norm"], (input,), {"ord": ord, "dim": dims,
                                                   "keepdim": bool(keepdim)})


def matrix_norm(input, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None, out=None):
    """'fro', 'nuc', 1, -1, 2, -2, inf or -inf norm of the matrices over dim, as
    torch.linalg.matrix_norm (2, -2, 'nuc': from the singular values)."""
    nd = input._data.ndim
    if nd < 2:
        raise RuntimeError("linalg.matrix_norm: The input tensor A must have at least 2 "
                           "dimensions.")
    d0, d1 = (norm_dim(d, nd) for d in dim)
    if d0 == d1:
        raise RuntimeError(f"linalg.matrix_norm: dims must be different. Got ({d0}, {d1})")
    if ord == "fro":
        return vector_norm(input, 2, (d0, d1), keepdim, dtype=dtype)
    if ord in ("nuc", 2, -2):          # PyTorch's: over svdvals of the dims moved last
        if dtype is not None:
            input = input.to(dtype)
        s = call(OPS["linalg_svd"], (input.movedim((d0, d1), (-2, -1)),),
                 {"full_matrices": False, "compute_uv": False})[1]
        # (ord 2 of an empty matrix: 0, as PyTorch's; -2 raises in amin as PyTorch's)
        r = s.sum(-1) if ord == "nuc" or (ord == 2 and not s.shape[-1]) \
            else s.amax(-1) if ord == 2 else s.amin(-1)
        if keepdim:
            for d in sorted((d0, d1)):
                r = r.unsqueeze(d)
        return r
    if isinstance(ord, str) or not isinstance(ord, numbers.Number) or \
            abs(ord) not in (1, math.inf):
        raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
    if math.isinf(ord):                 # PyTorch: the max (or min) row sum, over dim 0
        d0, d1 = d1, d0
    if not keepdim and d0 < d1:
        d1 -= 1
    sums = vector_norm(input, 1, (d0,), keepdim, dtype=dtype)
    return sums.amax(d1, keepdim) if ord > 0 else sums.amin(d1, keepdim)


def norm(input, ord=None, dim=None, keepdim=False, *, dtype=None, out=None):
    """linalg.norm: a vector norm over an int dim (or all of A when ord is None), a matrix
    norm over a 2-tuple dim or with a string ord."""
    if isinstance(dim, int):
        dim = (dim,)
    if dim is not None and len(dim) not in (1, 2):
        raise RuntimeError(f"linalg.norm: If dim is specified, it must be of length 1 or 2. "
                           f"Got {list(dim)}")
    if ord is not None and dim is None and input._data.ndim not in (1, 2):     # (string ords too)
        raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input "
                           f"must be 1D or 2D. Got {input._data.ndim}D.")
    if isinstance(ord, str) and dim is not None and len(dim) != 2:
        raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got {dim[0]}")
    if isinstance(ord, str) or (dim is not None and len(dim) == 2):
        return matrix_norm(input, "fro" if ord is None else ord, dim or (-2, -1), keepdim,
                           dtype=dtype)
    if ord is None:
        return vector_norm(input, 2, dim, keepdim, dtype=dtype)
    if dim is None and input._data.ndim == 2:
        return matrix_norm(input, ord, (-2, -1), keepdim, dtype=dtype)
    return vector_norm(input, ord, dim, keepdim, dtype=dtype)


def tensor_norm(self, p="fro", dim=None, keepdim=False, dtype=None):
    """torch.norm / Tensor.norm: 'fro' the 2-norm over dim (all dims by default), a number
    the vector p-norm over dim; as PyTorch's, any other string ('nuc'), or 'fro' over more
    than 2 dims, is a matrix norm over dim (all dims by default), so it raises unless that
    makes 2 dims."""
    dims = (dim,) if isinstance(dim, int) else dim
    if not isinstance(p, str):
        return vector_norm(self, 2 if p is None else p, dims, keepdim, dtype=dtype)
    if p == "fro" and (dims is None or len(dims) <= 2):
        return vector_norm(self, 2, dims, keepdim, dtype=dtype)
    dims = tuple(range(self._data.ndim)) if dims is None else tuple(dims)
    if len(dims) != 2:
        raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got "
                           f"{' '.join(str(d) for d in dims)}")
    return matrix_norm(self, p, dims, keepdim, dtype=dtype)


Tensor.norm = tensor_norm
tensor_norm.__name__ = "norm"
_method_fn("norm")
