"""Functions PyTorch has and llgrad writes as compositions, which build a tensor from another's
elements in a new arrangement: diff, rot90, kron, block_diag, cartesian_prod, combinations,
tril_indices / triu_indices, diagflat, take / take_along_dim (llgrad.* and Tensor methods)."""
import itertools

import numpy as np

from . import dispatch, dtypes, trace_state
from .creation import full_op, tensor as _tensor
from .device import check as check_device
from .dispatch import scalar_type_name as tname
from .functions import cat, export, stack
from .functions_math import attach
from .functions_tensor import meshgrid
from .meta_tensor import is_meta
from .shapes import norm_dim
from .node_names import torch_node
from .tensor import Tensor


# ---- differences, rotations, products of shapes -------------------------------------------------

def diff(input, n=1, dim=-1, prepend=None, append=None):
    """As torch.diff: the n-th forward difference along dim (logical_xor for bool), with
    prepend and append concatenated first (n 0: a copy of input, as PyTorch's)."""
    nd = input._data.ndim
    if nd == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    if n < 0:
        raise RuntimeError(f"order must be non-negative but got {n}")
    d = norm_dim(dim, nd)
    for t in (prepend, append):
        if t is not None and t._data.ndim != nd:
            raise RuntimeError("diff expects prepend or append to be the same dimension as input")
    parts = [t for t in (prepend, input, append) if t is not None]
    x = input.clone() if n == 0 else cat(parts, d) if len(parts) > 1 else input
    for _ in range(n):
        m = x._data.shape[d]
        if m == 0:
            break
        hi, lo = x.narrow(d, 1, m - 1), x.narrow(d, 0, m - 1)
        x = hi.logical_xor(lo) if x._dtype is dtypes.bool_ else hi - lo
    return x


@torch_node("Rot90Backward0")
def rot90(input, k=1, dims=(0, 1)):
    """As torch.rot90: rotated by 90 degrees k times from dims[0] towards dims[1]."""
    dims = list(dims)
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    nd = input._data.ndim
    if nd < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {nd}")
    d0, d1 = norm_dim(dims[0], nd), norm_dim(dims[1], nd)
    if d0 == d1:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {dims[0]} "
                           f"and dim1 = {dims[1]}")
    k %= 4
    if k == 1:
        return input.flip(d1).transpose(d0, d1)
    if k == 2:
        return input.flip(d0, d1)
    if k == 3:
        return input.flip(d0).transpose(d0, d1)
    return input.contiguous().clone()


def kron(input, other):
    """As torch.kron: the Kronecker product (one broadcast product, reshaped)."""
    nd = max(input._data.ndim, other._data.ndim)
    a = tuple(input._data.shape)
    b = tuple(other._data.shape)
    a, b = (1,) * (nd - len(a)) + a, (1,) * (nd - len(b)) + b
    x = input.reshape(tuple(v for s in a for v in (s, 1)))
    y = other.reshape(tuple(v for s in b for v in (1, s)))
    # (PyTorch's _unsafe_view of the product: UnsafeViewBackward0, not a view)
    return (x * y)._op("_unsafe_view", shape=tuple(p * q for p, q in zip(a, b)))


@torch_node("BlockDiagBackward0")
def block_diag(*tensors):
    """As torch.block_diag: the tensors (0-D, 1-D as a row, or 2-D) on the diagonal of a
    zero matrix of their promoted dtype."""
    if not tensors:
        return full_op((1, 0), 0, dtypes.get_default_dtype())
    mats = []
    for i, t in enumerate(tensors):
        nd = t._data.ndim
        if nd > 2:
            raise RuntimeError("torch.block_diag: Input tensors must have 2 or fewer "
                               f"dimensions. Input {i} has {nd} dimensions")
        mats.append(t.reshape(1, 1) if nd == 0 else t.reshape(1, t._data.size) if nd == 1
                    else t)
    dt = dtypes.result_type(*tensors)
    width = sum(m._data.shape[1] for m in mats)
    rows, left = [], 0
    for m in mats:
        r, c = m._data.shape
        pieces = [m if m._dtype is dt else m.to(dt)]
        if left:
            pieces.insert(0, full_op((r, left), 0, dt))
        if width - left - c:
            pieces.append(full_op((r, width - left - c), 0, dt))
        rows.append(cat(pieces, 1))
        left += c
    return cat(rows, 0)


def cartesian_prod(*tensors):
    """As torch.cartesian_prod: the rows of all combinations of the 1-D tensors' elements
    (the tensor itself for one)."""
    if not tensors:
        raise RuntimeError("meshgrid expects a non-empty TensorList")
    for t in tensors:
        if t._data.ndim != 1:
            raise RuntimeError(f"Expect a 1D vector, but got shape {list(t._data.shape)}")
    if len(tensors) == 1:
        return tensors[0]
    if any(t._dtype is not tensors[0]._dtype for t in tensors):
        raise RuntimeError("meshgrid expects all tensors to have the same dtype")
    return stack([g.reshape(-1) for g in meshgrid(*tensors, indexing="ij")], 1)


def combinations(input, r=2, with_replacement=False):
    """As torch.combinations: the rows of r-element combinations of a 1-D tensor, in
    itertools' order (a stack of their columns: PyTorch's StackBackward0, empty or not)."""
    if input._data.ndim != 1:
        raise RuntimeError(f"Expect a 1D vector, but got shape {list(input._data.shape)}")
    if r < 0:
        raise RuntimeError(f"Expect a non-negative number, but got {r}")
    pick = itertools.combinations_with_replacement if with_replacement else \
        itertools.combinations
    if not r:       # (PyTorch's empty result of r=0 is off the graph)
        return input.detach().new_zeros((0,))
    rows = np.array(list(pick(range(input._data.shape[0]), r)), np.int64).reshape(-1, r)
    return stack([input.index_select(0, _tensor(rows[:, k])) for k in range(r)], 1)


def _tri_indices(which, row, col, offset, dtype, device):
    check_device(device, "create a tensor on")
    for name, v in (("row", row), ("col", col)):
        if v < 0:
            raise RuntimeError(f"{name} must be non-negative, got{v}")
    fn = np.tril_indices if which == "tril" else np.triu_indices
    r, c = fn(row, offset, col)
    d = dtypes.int64 if dtype is None else dtypes.to_dtype(dtype)
    return _tensor(np.stack([r, c]).astype(d.np).reshape(2, -1))


def tril_indices(row, col, offset=0, *, dtype=None, device=None, layout=None):
    """As torch.tril_indices: the 2 x N (row, column) indices of the lower triangle."""
    return _tri_indices("tril", row, col, offset, dtype, device)


def triu_indices(row, col, offset=0, *, dtype=None, device=None, layout=None):
    """As torch.triu_indices: the 2 x N (row, column) indices of the upper triangle."""
    return _tri_indices("triu", row, col, offset, dtype, device)


def diagflat(input, offset=0):
    """As torch.diagflat: the flattened input on the offset diagonal of a square matrix."""
    return input.reshape(-1).diag(offset)


# ---- gathering by flat index, tiling ------------------------------------------------------------

@torch_node("TakeBackward0")
def take(input, index):
    """As torch.take: input's elements at index in the flattened input (negative counts
    from the end), shaped as index."""
    if index._dtype is not dtypes.int64:
        raise RuntimeError(f"take(): Expected a long tensor for index, but got "
                           f"{tname(index._dtype)}")
    n = input._data.size
    if n == 0 and index._data.size:
        raise IndexError("take(): tried to take from an empty tensor")
    bad = index._data[(index._data >= n) | (index._data < -n)]
    if bad.size:
        raise IndexError(f"out of range: tried to access index {int(bad.flat[0])} on a tensor "
                         f"of {n} elements.")
    idx = index.reshape(-1)
    idx = idx + (idx < 0).long() * n
    return input.reshape(-1).index_select(0, idx).reshape(tuple(index._data.shape))


def take_along_dim(input, indices, dim=None):
    """As torch.take_along_dim: gather along dim with input and indices broadcast against
    each other (a size 1 against a 0 is 0; the flattened input when dim is None)."""
    if indices._dtype is not dtypes.int64:
        raise RuntimeError("torch.take_along_dim(): dtype of indices should be Long but got "
                           f"{tname(indices._dtype)}")
    if dim is None:     # (ATen's views: a layout no view flattens raises view's error)
        return input.view(-1).gather(0, indices.view(-1))
    nd = input._data.ndim
    if indices._data.ndim != nd:
        raise RuntimeError("torch.take_along_dim(): input and indices should have the same "
                           f"number of dimensions, but got {nd} dimensions for input, and "
                           f"{indices._data.ndim} dimensions for indices")
    d = norm_dim(dim, nd)
    si, sx = list(indices._data.shape), list(input._data.shape)
    for j, (a, b) in enumerate(zip(sx, si)):
        if j != d and a != b and 1 not in (a, b):
            raise RuntimeError(f"The size of tensor a ({a}) must match the size of tensor b "
                               f"({b}) at non-singleton dimension {j}")
    if sx[d] and not _in_range(indices, sx[d]):
        # (PyTorch's wraps an index along dim: -1 is the last, 5 of 4 is 1)
        indices = indices.remainder(sx[d])
    common = [(b if a == 1 else a) if j != d else None for j, (a, b) in enumerate(zip(sx, si))]
    # (an operand of its shape already is itself: an expand is a node and ~10 us)
    xs, ix = ([sx[j] if j == d else c for j, c in enumerate(common)],
              [si[j] if j == d else c for j, c in enumerate(common)])
    x = input if xs == sx else input.expand(xs)
    return x.gather(d, indices if ix == si else indices.expand(ix))


def _in_range(indices, n):
    """Whether eager indices (no trace, vmap or meta tensor) all lie in [0, n): their
    remainder by n (an integer division's passes, ~100 us for 2,048) is then themselves."""
    if trace_state.state.tracer is not None or dispatch.batching is not None or \
            type(indices) is not Tensor or is_meta(indices):
        return False
    a = indices._data
    return a.size == 0 or (int(a.min()) >= 0 and int(a.max()) < n)


for _f in (diff, rot90, kron, diagflat, take, take_along_dim):
    attach(_f)
for _f in (block_diag, cartesian_prod, combinations, tril_indices, triu_indices):
    export(_f)
del _f
