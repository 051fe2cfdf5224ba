"""Vector norms and what PyTorch builds on them: F.normalize, F.cosine_similarity,
F.pairwise_distance and F.pdist, compositions of existing ops (as in PyTorch, whose backward
nodes these share where the last step is the same: DivBackward0 for normalize, SumBackward1
for cosine_similarity)."""
import math

import numpy as np

from ..runtime import grad_mode
from ..runtime.creation import tensor as _tensor, zeros
from ..runtime.dtypes import bfloat16, bool_, float16, result_type, scalar_type_name
from ..runtime.functions import where
from ..runtime.functions_stats import inf_distance
from ..runtime.linalg import vector_norm as _vector_norm
from ..runtime.shapes import broadcast_shapes
from ..runtime.node_names import torch_node

_NAMES = {"int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte",
          "bool": "Bool"}


def _check_dim(dim, nd):
    lo, hi = -max(nd, 1), max(nd, 1) - 1
    if not lo <= dim <= hi:
        raise IndexError(f"Dimension out of range (expected to be in range of [{lo}, {hi}], but "
                         f"got {dim})")
    return dim % max(nd, 1)


def vector_norm(x, p, dim, keepdim=False):
    """||x||_p over dim: PyTorch's linalg_vector_norm op (float16 summed in float32, as
    PyTorch's kernel: squares past float16's range do not overflow)."""
    return _vector_norm(x, p, dim, keepdim)


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """As torch.nn.functional.normalize."""
    dim = tuple(_check_dim(d, input.dim()) for d in dim) if isinstance(dim, (tuple, list)) \
        else _check_dim(dim, input.dim())
    denom = vector_norm(input, p, dim, keepdim=True).clamp_min(eps).expand_as(input)
    if out is not None:
        return out.copy_(input / denom)
    return input / denom


def _floating(x1, x2):
    dt = result_type(x1, x2)
    if not dt.is_floating_point:
        raise RuntimeError("expected common dtype to be floating point, yet common dtype is "
                           f"{_NAMES.get(dt.name, dt.name)}")
    return (x1 if x1.dtype == dt else x1.to(dt)), (x2 if x2.dtype == dt else x2.to(dt))


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """PyTorch's formula: each operand divided by its norm clamped to eps (the clamp
    applied without autograd, so the gradient flows through the norm itself), then the
    sum of their product over dim."""
    x1, x2 = _floating(x1, x2)
    shape = broadcast_shapes(tuple(x1.shape), tuple(x2.shape))
    # (ATen's expand_outplace: an operand of the shape already is itself)
    x1 = x1 if tuple(x1.shape) == shape else x1.expand(shape)
    x2 = x2 if tuple(x2.shape) == shape else x2.expand(shape)
    dim = _check_dim(dim, len(shape))
    # ATen's steps: the norms cloned and clamped in place without autograd, so the values
    # are exactly max(norm, eps) and the gradient passes the clamp as the clone's identity
    n1 = vector_norm(x1, 2, dim, keepdim=True).clone()
    n2 = vector_norm(x2, 2, dim, keepdim=True).clone()
    with grad_mode.no_grad():
        n1.clamp_min_(eps)
        n2.clamp_min_(eps)
    return ((x1 / n1) * (x2 / n2)).sum(dim)


@torch_node("NormBackward1")
def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """As torch.nn.functional.pairwise_distance."""
    nd = max(x1.dim(), x2.dim())
    d = x1 - x2 + eps
    return vector_norm(d, p, nd - 1, keepdim=keepdim)


@torch_node("PdistBackward0")
def pdist(input, p=2):
    """As torch.nn.functional.pdist (torch.pdist): the p-norm distances between the rows of
    input (N, M), for every pair i < j in row-major order (N (N - 1) / 2 of them)."""
    if input.dim() != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.dim()}D")
    if not input.is_floating_point():
        raise RuntimeError("pdist only supports floating-point dtypes")
    if p < 0:
        raise RuntimeError("pdist only supports non-negative p values")
    n, m = input.shape
    if input.dtype in (float16, bfloat16) and n > 1 and m > 0:   # (ATen's float/double kernel)
        raise NotImplementedError(f'"pdist" not implemented for '
                                  f"'{scalar_type_name(input.dtype)}'")
    i, j = np.triu_indices(input.shape[0], 1)
    diff = input.index_select(0, _tensor(i.astype(np.int64))) - \
        input.index_select(0, _tensor(j.astype(np.int64)))
    if p == float("inf"):
        return inf_distance(diff, 1)
    out = vector_norm(diff, p, 1)
    if p == 0 and diff.requires_grad:
        # a count of non-zeros: ATen's backward gives the input a zero gradient (not none)
        never = zeros(out.shape, dtype=bool_)
        out = out + where(never, diff.sum(1), 0.0)
    return out
