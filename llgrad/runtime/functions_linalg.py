"""Products PyTorch has and llgrad writes as compositions of mm / mv / bmm, elementwise ops
and views: cross (linalg.cross), inner, tensordot, vdot, trace, chain_matmul /
linalg.multi_dot (PyTorch's multiplication order), addmv / addr / addbmm and the in-place
addmm_ / addmv_ / addr_ / addbmm_, matrix_power (linalg.matrix_power; a negative power: of
the inverse), linalg.vecdot."""
import math
import warnings

import numpy as np

from . import dtypes, trace_state
from .dispatch import scalar_type_name as tname
from .functions import export
from .functions_math import attach, make_inplace
from .shapes import broadcast_shapes, norm_dim
from .tensor import Tensor
from .node_names import torch_node
from .out_write import into
from .user_frames import user_stacklevel
from .autocast_cast import autocast_lower, float32_list


@torch_node("LinalgCrossBackward0")
def linalg_cross(input, other, *, dim=-1):
    """As torch.linalg.cross: the cross product of 3-vectors along dim (broadcast)."""
    if input._data.ndim != other._data.ndim:
        raise RuntimeError("linalg.cross: inputs must have the same number of dimensions.")
    if input._dtype is not other._dtype:
        raise RuntimeError(f"expected scalar type {tname(input._dtype)} but found "
                           f"{tname(other._dtype)}")
    d = norm_dim(dim, input._data.ndim)
    a, b = input._data.shape[d], other._data.shape[d]
    if a != 3 or b != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got {a} "
                           f"and {b}")
    shape = broadcast_shapes(tuple(input._data.shape), tuple(other._data.shape))
    x, y = input.expand(shape), other.expand(shape)
    # c_i = x_{i+1} y_{i+2} - x_{i+2} y_{i+1}: PyTorch's products, in its order
    return x.roll(-1, d) * y.roll(-2, d) - x.roll(-2, d) * y.roll(-1, d)


@torch_node("LinalgCrossBackward0")
def cross(input, other, dim=None):
    """As torch.cross: linalg.cross along dim; without dim (deprecated, with PyTorch's
    warning) along the first dim of size 3."""
    if dim is None:
        warnings.warn("Using torch.cross without specifying the dim arg is deprecated.\nPlease "
                      "either pass the dim explicitly or simply use torch.linalg.cross.\nThe "
                      "default value of dim will change to agree with that of linalg.cross in a "
                      "future release.", UserWarning, stacklevel=user_stacklevel())
        shape = broadcast_shapes(tuple(input._data.shape), tuple(other._data.shape))
        dim = next((j for j, n in enumerate(shape) if n == 3), None)
        if dim is None:
            raise RuntimeError("no dimension of size 3 in input")
    return linalg_cross(input, other, dim=dim)


def tensordot(a, b, dims=2, out=None):
    """As torch.tensordot: the sum of products over dims (an int: a's last and b's first
    dims; or two lists of dims), as one mm of permuted, reshaped operands."""
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if isinstance(dims, int):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        da, db = list(range(-dims, 0)), list(range(dims))
    else:
        if not isinstance(dims, (tuple, list)):
            raise RuntimeError("tensordot expects dims to be int or tuple[list[int], list[int]] "
                               f"or list[list[int]] containing two lists, but got dims={dims}")
        if len(dims) != 2:              # (PyTorch unpacks dims_a, dims_b = dims)
            raise ValueError(f"{'not enough' if len(dims) < 2 else 'too many'} values to "
                             f"unpack (expected 2{f', got {len(dims)}' if len(dims) < 2 else ''})")
        for k, d in enumerate(dims):    # (PyTorch's binding takes two lists, not ints)
            if isinstance(d, int):
                raise TypeError(f"tensordot(): argument '{('dims_self', 'dims_other')[k]}' "
                                f"(position {k + 3}) must be tuple of ints, not int")
        da, db = (list(d) for d in dims)
    if len(da) != len(db):
        raise RuntimeError("both dimension lists should have same length")
    if a._dtype is not b._dtype:
        raise RuntimeError("both inputs should have same dtype")
    given = list(zip(da, db))       # (PyTorch's messages name the dims as given)
    da = [norm_dim(d, a._data.ndim) for d in da]
    db = [norm_dim(d, b._data.ndim) for d in db]
    sa, sb = a._data.shape, b._data.shape
    for x, y, (gx, gy) in zip(da, db, given):
        # (a dim of size 1 broadcasts: the other operand is summed over it first, as
        # PyTorch's, in its own dtype: an int32 sum stays int32)
        if sb[y] == 1:
            a = a.sum(x, keepdim=True, dtype=a.dtype)
        elif sa[x] == 1:
            b = b.sum(y, keepdim=True, dtype=b.dtype)
        elif sa[x] != sb[y]:
            raise RuntimeError(f"contracted dimensions need to match, but first has size "
                               f"{sa[x]} in dim {gx} and second has size {sb[y]} in dim {gy}")
    sa, sb = a._data.shape, b._data.shape
    fa = [d for d in range(a._data.ndim) if d not in da]
    fb = [d for d in range(b._data.ndim) if d not in db]
    k = math.prod(sa[d] for d in da)
    pa = a.permute(fa + da).reshape(math.prod(sa[d] for d in fa), k)
    pb = b.permute(db + fb).reshape(k, math.prod(sb[d] for d in fb))
    r = pa.mm(pb).reshape(tuple(sa[d] for d in fa) + tuple(sb[d] for d in fb))
    return into(out, r)


def inner(input, other):
    """As torch.inner: the sum of products over the last dims (a product with a 0-d
    tensor)."""
    if input._data.ndim == 0 or other._data.ndim == 0:
        return input * other
    a, b = input._data.shape[-1], other._data.shape[-1]
    if a != b:
        raise RuntimeError(f"inner() the last dimension must match on both input tensors but "
                           f"got shapes {list(input._data.shape)} and {list(other._data.shape)}")
    if input._dtype is not other._dtype:
        raise RuntimeError("both inputs should have same dtype")
    return tensordot(input, other, ([-1], [-1]))


@torch_node("VdotBackward0")
def vdot(input, other):
    """As torch.vdot: the dot product of two 1-D tensors, the first conjugated (real:
    torch.dot)."""
    return input.conj().dot(other)


@float32_list
@torch_node("TraceBackward0")
def trace(input):
    """As torch.trace: the sum of a matrix's diagonal."""
    if input._data.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim "
                           f"{input._data.ndim}")
    dtypes.no_bool_kernel((input,), "trace")
    return input.diagonal().sum()


# ---- chains of products -------------------------------------------------------------------------

def _chain(ms):
    """PyTorch's multi_dot order: the cheaper of the two for 3 matrices, the matrix-chain
    dynamic programme (first best split) beyond."""
    n = len(ms)
    if n == 1:
        return ms[0]
    if n == 2:
        return ms[0].mm(ms[1])
    if n == 3:
        a, b = ms[0]._data.shape
        c, d = ms[2]._data.shape
        if (a * c) * (b + d) > (b * d) * (a + c):
            return ms[0].mm(ms[1].mm(ms[2]))
        return ms[0].mm(ms[1]).mm(ms[2])
    p = [m._data.shape[0] for m in ms] + [ms[-1]._data.shape[1]]
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = math.inf
            for k in range(i, j):
                q = cost[i][k] + cost[k + 1][j] + p[i] * p[k + 1] * p[j + 1]
                if q < cost[i][j]:
                    cost[i][j], split[i][j] = q, k

    def product(i, j):
        if i == j:
            return ms[i]
        return product(i, split[i][j]).mm(product(split[i][j] + 1, j))
    return product(0, n - 1)


def multi_dot(tensors):
    """As torch.linalg.multi_dot: the product of the matrices (the first may be a row and
    the last a column vector), multiplied in PyTorch's order."""
    ts = list(tensors)
    n = len(ts)
    if n < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {n}")
    first, last = ts[0]._data.ndim, ts[-1]._data.ndim
    if first not in (1, 2):
        raise RuntimeError(f"multi_dot(): the first tensor must be 1D or 2D but got {first}D")
    if last not in (1, 2):
        raise RuntimeError(f"multi_dot(): the last tensor must be 1D or 2D but got {last}D")
    for i, t in enumerate(ts[1:], 1):
        if t._data.ndim != 2 and i < n - 1:
            raise RuntimeError(f"multi_dot(): tensor {i} must be 2D but got {t._data.ndim}D")
        if t._dtype is not ts[0]._dtype:
            raise RuntimeError(f"multi_dot(): all tensors must have be the same dtype but tensor "
                               f"0 is {dtypes.C_NAMES[ts[0]._dtype.name]} and tensor {i} "
                               f"{dtypes.C_NAMES[t._dtype.name]}")
    ms = [ts[0].unsqueeze(0) if first == 1 else ts[0]] + ts[1:-1] + \
         [ts[-1].unsqueeze(1) if last == 1 else ts[-1]]
    for i in range(n - 1):
        if ms[i]._data.shape[1] != ms[i + 1]._data.shape[0]:
            raise RuntimeError(f"multi_dot(): tensors {i} and {i + 1} with shapes "
                               f"{list(ts[i]._data.shape)} and {list(ts[i + 1]._data.shape)} "
                               "cannot be multiplied")
    r = _chain(ms)      # (then a view, as PyTorch's: ViewBackward0 whatever the shapes)
    rows, cols = r._data.shape
    return r.view((rows,) * (first - 1) + (cols,) * (last - 1))


_warned_chain_matmul = False


def chain_matmul(*matrices, out=None):
    """As torch.chain_matmul (deprecated, with PyTorch's warning once): the product of 2-D
    matrices, in linalg.multi_dot's order."""
    global _warned_chain_matmul
    if not _warned_chain_matmul:
        _warned_chain_matmul = True
        trace_state.warn_first(
            "torch.chain_matmul is deprecated and will be removed in a future PyTorch "
            "release. Use torch.linalg.multi_dot instead, which accepts a list of two or more "
            "tensors rather than multiple parameters.", UserWarning, stacklevel=2)
    if len(matrices) == 1 and isinstance(matrices[0], (list, tuple)):
        matrices = tuple(matrices[0])
    if not matrices:
        raise RuntimeError("chain_matmul(): Expected one or more matrices")
    for t in matrices:
        if t._data.ndim != 2:
            raise RuntimeError(f"Tensor dimension is {t._data.ndim}, expected 2 instead.")
    r = matrices[0].clone() if len(matrices) == 1 else multi_dot(matrices)
    return into(out, r)


# ---- beta * input + alpha * product -------------------------------------------------------------

def _scales_check(dt, beta, alpha):
    if not dt.is_floating_point:
        for name, v in (("beta", beta), ("alpha", alpha)):
            if isinstance(v, float):
                raise RuntimeError(f"For integral input tensors, argument {name} must not be a "
                                   "floating point number.")


def _add_scaled(input, prod, beta, alpha):
    """beta * input + alpha * prod as PyTorch computes it: input is not read when beta is 0
    (its nan and inf do not propagate), and a scale of 1 multiplies nothing."""
    shape = tuple(prod._data.shape)
    if tuple(broadcast_shapes(tuple(input._data.shape), shape)) != shape:
        raise RuntimeError(f"The expanded size of the tensor ({shape[-1]}) must match the "
                           f"existing size ({input._data.shape[-1]}) at non-singleton dimension "
                           f"{len(shape) - 1}.  Target sizes: {list(shape)}.  Tensor sizes: "
                           f"{list(input._data.shape)}")
    p = prod if alpha == 1 else prod * alpha
    if beta == 0:   # input unread, yet its gradient is zeros (PyTorch's): where picks 0
        return p + input.where(input.new_zeros((), dtype=dtypes.bool_), 0) \
            if input.requires_grad else p
    return (input if beta == 1 else input * beta) + p


@torch_node("AddmvBackward0")
def addmv(input, mat, vec, *, beta=1, alpha=1):
    """As torch.addmv: beta * input + alpha * (mat @ vec)."""
    if mat._data.ndim != 2 or vec._data.ndim != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got {input._data.ndim}, "
                           f"{mat._data.ndim}, {vec._data.ndim}")
    if mat._data.shape[1] != vec._data.shape[0] or input._data.ndim > 1 or (
            input._data.ndim == 1 and input._data.shape[0] not in (1, mat._data.shape[0])):
        got = input._data.shape[0] if input._data.ndim else 1
        raise RuntimeError(f"size mismatch, got input ({got}), mat "
                           f"({mat._data.shape[0]}x{mat._data.shape[1]}), vec "
                           f"({vec._data.shape[0]})")
    if not input._dtype is mat._dtype is vec._dtype:
        raise RuntimeError(f"addmv input tensors must have the same dtype, but got "
                           f"{tname(input._dtype)}, {tname(mat._dtype)}, and "
                           f"{tname(vec._dtype)}")
    s = dtypes.int_scales(input._dtype, beta, alpha)    # (PyTorch truncates float scales)
    return _add_scaled(input, mat.mv(vec), s["beta"], s["alpha"])


@torch_node("AddrBackward0")
def addr(input, vec1, vec2, *, beta=1, alpha=1):
    """As torch.addr: beta * input + alpha * outer(vec1, vec2) (and / or for bool)."""
    for name, v in (("vec1", vec1), ("vec2", vec2)):
        if v._data.ndim != 1:
            raise RuntimeError(f"addr: Expected 1-D argument {name}, but got {v._data.ndim}-D")
    dt = dtypes.result_type(input, vec1, vec2)
    if dt is dtypes.bool_:
        prod = vec1.unsqueeze(1).logical_and(vec2.unsqueeze(0))
        prod = prod if alpha else prod & False
        return prod.logical_or(input) if beta else prod
    _scales_check(dt, beta, alpha)
    if dt is dtypes.float16:    # (ATen's kernel: beta, alpha into half, (alpha v1) v2, each
        beta, alpha = (float(np.float16(v)) if type(v) is float else v for v in (beta, alpha))
        return _add_scaled(input, (vec1 * alpha).outer(vec2), beta, 1)     # step rounded)
    return _add_scaled(input, vec1.outer(vec2), beta, alpha)


@torch_node("AddbmmBackward0")
def addbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """As torch.addbmm: beta * input + alpha * the sum over the batch of batch1 @ batch2."""
    input, batch1, batch2 = autocast_lower(input, batch1, batch2)
    for name, b in (("batch1", batch1), ("batch2", batch2)):
        if b._data.ndim != 3:
            raise RuntimeError(f"{name} must be a 3D tensor")
    if batch1._data.shape[0] != batch2._data.shape[0]:
        raise RuntimeError(f"batch1 and batch2 must have same number of batches, got "
                           f"{batch1._data.shape[0]} and {batch2._data.shape[0]}")
    n = batch1._data.shape[0]
    if batch1._dtype is dtypes.float16 and n:   # (PyTorch's CPU loop: an addmm per batch
        out = input.addmm(batch1[0], batch2[0], beta=beta, alpha=alpha)     # each rounded)
        for i in range(1, n):
            out = out.addmm(batch1[i], batch2[i], alpha=alpha)
        return out
    s = dtypes.int_scales(input._dtype, beta, alpha)    # (PyTorch truncates float scales)
    prod = batch1.bmm(batch2).sum(0, dtype=batch1._dtype)    # (sum would widen integers)
    return _add_scaled(input, prod, s["beta"], s["alpha"])


def matrix_power(input, n):
    """As torch.linalg.matrix_power (PyTorch's repeated squaring, its order of products;
    a negative n: of the inverse)."""
    nd = input._data.ndim
    if nd < 2:
        raise RuntimeError("linalg.matrix_power: The input tensor A must have at least 2 "
                           "dimensions.")
    r, c = input._data.shape[-2:]
    if r != c:
        raise RuntimeError("linalg.matrix_power: A must be batches of square matrices, but "
                           f"they are {r} by {c} matrices")
    if n < 0:
        input, n = input.inverse(), -n
        if n == 1:
            return input
    # (n 0 and 1: PyTorch's result is a row-major copy whatever input's layout)
    if n == 0:
        eye = (input.new_ones((r,)).diag()).expand(tuple(input._data.shape))
        # (PyTorch's result: a copy, zero gradient)
        return input.clone(memory_format="contiguous_format").copy_(eye)
    if n == 1:
        return input.clone(memory_format="contiguous_format")
    if n == 2:
        return input.matmul(input)
    if n == 3:
        return input.matmul(input).matmul(input)
    z = result = None
    while n > 0:
        bit, n = n % 2, n // 2
        z = input if z is None else z.matmul(z)
        if bit:
            result = z if result is None else result.matmul(z)
    return result


def vecdot(x, y, *, dim=-1):
    """As torch.linalg.vecdot: the sum of x * y along dim (broadcast)."""
    x, y = autocast_lower(x, y)
    return (x * y).sum(dim)


for _f, _inp in ((cross, None), (inner, None), (vdot, None), (addmv, "addmv_"),
                 (addr, "addr_"), (addbmm, "addbmm_"), (matrix_power, None)):
    attach(_f, inplace_name=_inp)
export(tensordot)
export(chain_matmul)
Tensor.trace = trace
Tensor.addmm_ = make_inplace(lambda self, mat1, mat2, *, beta=1, alpha=1:
                             self.addmm(mat1, mat2, beta=beta, alpha=alpha), "addmm_")
export(Tensor.addmv_)
del _f, _inp
