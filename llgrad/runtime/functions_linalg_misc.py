"""torch.linalg's names that are compositions of other ops, with PyTorch's signatures and
checks: linalg.diagonal, matmul, vander, tensorinv, tensorsolve, householder_product (and
torch.orgqr, Tensor.orgqr)."""
import math

from .creation import eye
from .dispatch import scalar_type_name as tname
from .functions import cat, export
from .functions_linalg_solve import _out, check_matrix, solve
from .functions_matrix import inverse
from .tensor import Tensor
from .autocast_cast import autocast_lower, float32_list


def diagonal(A, *, offset=0, dim1=-2, dim2=-1):
    """As torch.linalg.diagonal: torch.diagonal with the last two dims by default."""
    return A.diagonal(offset, dim1, dim2)


def matmul(input, other, *, out=None):
    """As torch.linalg.matmul: torch.matmul."""
    input, other = autocast_lower(input, other)
    return _out(input.matmul(other), out)


def vander(x, *, N=None):
    """As torch.linalg.vander: columns x^0, x^1, ..., x^(N-1) (PyTorch's cumprod)."""
    if not isinstance(x, Tensor):
        raise TypeError(f"vander(): argument 'x' (position 1) must be Tensor, not "
                        f"{type(x).__name__}")
    if x.dtype.name == "bool":
        raise RuntimeError("linalg.vander supports floating point, complex, and integer "
                           "tensors, but got Bool")
    if x.dim() < 1:         # (PyTorch reads a 0-d x as one of one element)
        x = x.unsqueeze(-1)
    n = x.shape[-1] if N is None else N
    if n <= 1:
        raise RuntimeError("N must be greater than 1.")
    powers = x.unsqueeze(-1).expand(tuple(x.shape) + (n - 1,)).cumprod(-1)
    ones = x.new_zeros(tuple(x.shape) + (1,)).to(powers.dtype) + 1
    return cat([ones, powers], -1)


@float32_list
def tensorinv(input, ind=2, *, out=None):
    """As torch.linalg.tensorinv: the inverse of A read as a prod(shape[:ind]) square matrix,
    shaped shape[ind:] + shape[:ind]."""
    if ind <= 0:
        raise RuntimeError(f"Expected a strictly positive integer for 'ind', but got {ind}")
    lead, rest = tuple(input.shape[:ind]), tuple(input.shape[ind:])
    p, q = math.prod(lead), math.prod(rest)
    if p != q:
        raise RuntimeError("Expected self to satisfy the requirement prod(self.shape[ind:]) == "
                           "prod(self.shape[:ind]), but got "
                           f"{q} != {p}")
    return _out(inverse(input.reshape(p, q)).reshape(rest + lead), out)


@float32_list
def tensorsolve(input, other, dims=None, *, out=None):
    """As torch.linalg.tensorsolve: X with tensordot(A, X, X.ndim) = B (dims: A's dims moved
    to the end first)."""
    if dims is not None:
        nd = input.dim()
        dims = [d % nd for d in dims]
        order = [d for d in range(nd) if d not in dims] + list(dims)
        input = input.permute(*order)
    rest = tuple(input.shape[other.dim():])
    p, q = other.numel(), math.prod(rest)
    if p != q:      # (PyTorch compares the counts only: B's shape may be another)
        raise RuntimeError("Expected self to satisfy the requirement prod(self.shape[other.ndim:])"
                           f" == prod(self.shape[:other.ndim]), but got {q} != {p}")
    return _out(solve(input.reshape(p, q), other.reshape(p)).reshape(rest), out)


@float32_list
def householder_product(input, tau, *, out=None):
    """As torch.linalg.householder_product (torch.orgqr): the first n columns of
    H_1 ... H_k, H_i = I - tau_i v_i v_i^T, v_i the i-th column of A below the diagonal with a 1
    on it (differentiable as its products)."""
    name = "torch.linalg.householder_product"
    check_matrix(name, input, square=False, arg="input")
    m, n = input.shape[-2:]
    k = tau.shape[-1]
    if m < n:
        raise RuntimeError(f"{name}: input.shape[-2] must be greater than or equal to "
                           "input.shape[-1]")
    if n < k:
        raise RuntimeError(f"{name}: input.shape[-1] must be greater than or equal to "
                           "tau.shape[-1]")
    if tau.dim() != input.dim() - 1 or tuple(tau.shape[:-1]) != tuple(input.shape[:-2]):
        raise RuntimeError(f"{name}: Expected batch dimensions of tau to be equal to "
                           "input.shape[:-2]")
    if tau.dtype is not input.dtype:
        raise RuntimeError(f"{name}: tau dtype {tname(tau.dtype)} does not match input dtype "
                           f"{tname(input.dtype)}")
    ident = eye(m, dtype=input.dtype)
    below = eye(m, dtype=input.dtype).cumsum(0) - ident          # strictly below the diagonal
    q = eye(m, n, dtype=input.dtype).expand(tuple(input.shape[:-2]) + (m, n))
    for i in range(k - 1, -1, -1):
        v = input[..., :, i] * below[:, i] + ident[:, i]          # (..., m)
        q = q - (tau[..., i, None] * v).unsqueeze(-1) * v.unsqueeze(-2).matmul(q)
    return _out(q, out)


@float32_list
def orgqr(input, input2):
    """As torch.orgqr: linalg.householder_product."""
    return householder_product(input, input2)


export(orgqr)
Tensor.orgqr = orgqr
