"""Tensor ops that move or pick elements by position (tril, triu, flip, roll, repeat,
diag_embed, diagonal_copy, unfold), cumprod, baddbmm, and the rounding family (ceil, trunc,
frac, round with decimals).

Attributes arrive normalised by the Tensor methods (llgrad/runtime/methods_tensor.py):
dims are non-negative ints, shifts and repeats tuples of ints."""
import functools

import numpy as np

from .ops_copy import preserve_copy
from .np_matmul import matmul
from . import np_cumsum
from .optable import defop
from .ops_shape import _diagonal, view_vjp

# ---- triangles --------------------------------------------------------------------------


@functools.lru_cache(maxsize=64)
def _tri_mask(rows, cols, k):
    mask = np.tri(rows, cols, k, dtype=bool)
    mask.flags.writeable = False
    return mask


def _tri(lower):
    def impl(x, diagonal=0):
        # np.tril/np.triu's where (on the last two dims of a stack of matrices, as PyTorch's),
        # its mask kept and its fresh result not copied again (the dispatcher's c_order lays
        # it out row-major, as PyTorch's)
        x = np.asarray(x)
        zero = np.zeros(1, x.dtype)
        if lower:
            return np.where(_tri_mask(*x.shape[-2:], diagonal), x, zero)
        return np.where(_tri_mask(*x.shape[-2:], diagonal - 1), zero, x)
    return impl


defop("tril", _tri(True), vjp=lambda c, g: (g.tril(c.diagonal),), grad_fn="TrilBackward0",
      functions=("tril",), complex=True)
defop("triu", _tri(False), vjp=lambda c, g: (g.triu(c.diagonal),), grad_fn="TriuBackward0",
      functions=("triu",), complex=True)

# ---- flips, rolls, repeats ---------------------------------------------------------------

def _flip(x, dims):
    if not any(s == 0 and n > 1 for s, n in zip(x.strides, x.shape)):
        return np.array(np.flip(x, dims), copy=True)
    out = preserve_copy(x)          # (PyTorch's: x's empty_like, not the flipped view's)
    out[...] = np.flip(x, dims)
    return out


defop("flip", _flip,
      vjp=lambda c, g: (g.flip(c.dims),), grad_fn="FlipBackward0", complex=True)


def _roll(x, shifts, dims=None):
    if dims is None:                    # the flattened tensor, rolled, in x's shape
        return np.roll(x, shifts[0]).reshape(x.shape)
    return np.roll(x, shifts, axis=dims)


defop("roll", _roll, grad_fn="RollBackward0",
      vjp=lambda c, g: (g._op("roll", shifts=tuple(-s for s in c.shifts), dims=c.dims),), complex=True)


def _repeat_vjp(c, g):
    """The sum of the gradient over the copies: g seen as (r0, s0, r1, s1, ...), summed over
    the r dims (x's shape padded with leading 1s to the repeats' length)."""
    shape, reps = tuple(c.shape(0)), c.repeats
    padded = (1,) * (len(reps) - len(shape)) + shape
    inter = [n for pair in zip(reps, padded) for n in pair]
    return (g.reshape(inter).sum(tuple(range(0, 2 * len(reps), 2))).reshape(shape),)


defop("repeat", lambda x, repeats: np.tile(x, repeats), vjp=_repeat_vjp,
      grad_fn="RepeatBackward0", complex=True)

# ---- diagonals ---------------------------------------------------------------------------


def _diag_embed(x, offset=0, dim1=0, dim2=1):
    """x's last dim as the diagonal (offset) of the plane (dim1, dim2) of a zero result."""
    n = x.shape[-1] + abs(offset)
    shape = list(x.shape[:-1])
    for d in sorted((dim1, dim2)):
        shape.insert(d, n)
    out = np.zeros(shape, dtype=x.dtype)
    _diagonal(out, offset, dim1, dim2)[...] = x
    return out


defop("diag_embed", _diag_embed, grad_fn="DiagEmbedBackward0",
      vjp=lambda c, g: (g.diagonal(c.offset, c.dim1, c.dim2),), functions=("diag_embed",), complex=True)
# diag(matrix): PyTorch's diagonal_copy (a copy, not a view), with its node's odd name
defop("diagonal_copy", lambda x, offset=0, dim1=0, dim2=1:
      np.array(_diagonal(x, offset, dim1, dim2), copy=True),
      grad_fn="DiagonalBackward0_copy", vjp=view_vjp(_diagonal), complex=True)

# ---- unfold: sliding windows (a view) -------------------------------------------------------


def _unfold(x, dimension, size, step):
    """Windows of `size` every `step` along dimension, as a new last dim (a view). Windows
    that share elements make it read-only: writing through it raises, as in PyTorch."""
    if x.ndim == 0:
        shape, strides = (size,), (0,)
    else:
        n, s = x.shape[dimension], x.strides[dimension]
        count = (n - size) // step + 1
        shape = x.shape[:dimension] + (count,) + x.shape[dimension + 1:] + (size,)
        strides = x.strides[:dimension] + (s * step,) + x.strides[dimension + 1:] + (s,)
    overlaps = any(st_ == 0 and n_ > 1 for n_, st_ in zip(shape, strides)) or (
        x.ndim and step < size and shape[dimension] > 1 and size > 1)
    return np.lib.stride_tricks.as_strided(x, shape, strides,
                                           writeable=x.flags.writeable and not overlaps)


defop("unfold", _unfold, kind="view", grad_fn="UnfoldBackward0", vjp=view_vjp(_unfold), complex=True)

# ---- cumprod -----------------------------------------------------------------------------


def _cumprod(x, dim):
    # (float16 multiplied in float32 and float32 in float64, rounded once each, as PyTorch)
    acc = np.int64 if x.dtype.kind in "biu" else \
        {np.float16: np.float32, np.float32: np.float64}.get(x.dtype.type)
    with np.errstate(over="ignore", invalid="ignore"):  # (NumPy's wrapper warns as numpy's module)
        r = np_cumsum.cumprod(x, dim, acc)
    return r.reshape(x.shape).astype(np.int64 if acc is np.int64 else x.dtype, copy=False)


def _reversed_cumsum(t, d):
    return t.flip((d,)).cumsum(d).flip((d,))


def _zeros_of(x, d):
    zero = x == 0
    nzero = zero.cumsum(d)
    # zeros, before the first, the first, from the second on
    return zero, nzero == 0, zero & (nzero == 1), nzero > 1


def _first_order(x, g, out, d):
    """The gradient of out = cumprod(x) (exact in value, zeros included), in O(n): before a
    slice's first zero reversed_cumsum(g * out) / x over the products before the zero; at
    the first zero reversed_cumsum(g * cumprod(x with that zero set to 1)) over the products
    before the second; after it 0. (The products past a zero are 0 in value but NaN where a
    NaN or inf follows: PyTorch's cumprod_backward leaves them out, so does this.)"""
    zero, before, first, second = _zeros_of(x, d)
    gx = _reversed_cumsum((g * out).masked_fill(before.logical_not(), 0), d) / \
        x.masked_fill(zero, 1)
    gz = _reversed_cumsum((g * x.masked_fill(first, 1).cumprod(d)).masked_fill(second, 0), d)
    return gx.where(before, gz.masked_fill(first.logical_not(), 0))


def _cumprod_vjp(c, g):
    """PyTorch's gradient (cumprod_backward), zeros included: the O(n) formula of
    _first_order, exact in value; while a graph of the gradient is built (create_graph),
    where a slice holds a zero, the O(n^2) one PyTorch switches to, exact in derivative."""
    x, d = c.self, c.dim
    if x.ndim == 0 or x.shape[d] <= 1:
        return (g,)
    if not getattr(c, "building_graph", False) and not getattr(c, "recorded", True) and \
            not bool((x == 0).any()):
        # (eager, no zero: _first_order's masks all select its first term, so this is its
        # value, at a third of its ops)
        return (_reversed_cumsum(g * c.result, d) / x,)
    if getattr(c, "building_graph", False):
        if not getattr(c, "recorded", True):
            if bool((x == 0).any()):
                return (_omitted_products_grad(x, g, d),)
        else:
            has_zero = (x == 0).any(d, keepdim=True)
            return (_omitted_products_grad(x, g, d).where(has_zero,
                                                          _first_order(x, g, c.result, d)),)
    return (_first_order(x, g, c.result, d),)


def _omitted_products_grad(x, g, d):
    """PyTorch's cumprod_backward under grad mode when a slice holds a zero: element k's
    gradient is sum_{i>=k} g_i * prod_{j<=i, j!=k} x_j, a polynomial in x written with
    products only (O(n^2)), so its own derivative is exact at every zero; the O(n) masked
    formula is exact in value but drops the derivative of the masked terms (a zero's
    derivative of the elements before it)."""
    n = x.shape[d]
    columns = []
    for k in range(n):
        before = x.narrow(d, 0, k).prod(d, keepdim=True) if k else None
        rest = x.narrow(d, k + 1, n - k - 1).cumprod(d) if k < n - 1 else None
        if before is None:
            omitted = rest.new_ones((*rest.shape[:d], 1, *rest.shape[d + 1:]))._op(
                "cat", rest, dim=d)
        elif rest is None:
            omitted = before
        else:
            omitted = before._op("cat", before * rest, dim=d)
        columns.append((g.narrow(d, k, n - k) * omitted).sum(d, keepdim=True))
    return columns[0]._op("cat", *columns[1:], dim=d)


# (eager float ones of 4096 elements or more: the lowering's loop on eager_shaped.py's kernels,
# the same products in the same order: NumPy's accumulate took ~14 ns an element)
defop("cumprod", _cumprod, save=("self", "result"), grad_fn="CumprodBackward0",
      vjp=_cumprod_vjp, eager_kernel="shaped", eager_min_elements=4096)

# ---- baddbmm -----------------------------------------------------------------------------


def _baddbmm(x, b1, b2, beta=1, alpha=1):
    if b1.dtype == np.float16:  # (as PyTorch's CPU kernel: in float32, rounded once)
        f = np.float32
        return _baddbmm(np.asarray(x, f), b1.astype(f), b2.astype(f), beta, alpha).astype(b1.dtype)
    p = matmul(b1, b2)
    if alpha != 1:
        p = p * alpha
    if beta == 0:                       # the input is ignored (nan and inf in it too)
        return np.array(p, dtype=p.dtype)
    out = p + (x if beta == 1 else x * beta)
    return np.array(np.broadcast_to(out, p.shape), dtype=p.dtype)


def _baddbmm_vjp(c, g):
    b1, b2 = c.batch1, c.batch2
    gs = (g if c.beta == 1 else g * c.beta) if c.needs(0) else None   # (summed to self's shape)
    g1 = g.bmm(b2.mT) if c.needs(1) else None
    g2 = b1.mT.bmm(g) if c.needs(2) else None
    if c.alpha != 1:
        g1 = g1 * c.alpha if g1 is not None else None
        g2 = g2 * c.alpha if g2 is not None else None
    return gs, g1, g2


def _baddbmm_primitives(node, emit):
    """bmm, then the scaled input added (as _baddbmm computes it)."""
    x, b1, b2 = node.inputs[:3]
    beta, alpha = node.attrs.get("beta", 1), node.attrs.get("alpha", 1)
    y = emit("bmm", [b1, b2])
    if alpha != 1:
        y = emit("mul", [y, alpha])
    if beta == 0:
        return y
    return emit("add", [y, emit("mul", [x, beta]) if beta != 1 else x], alpha=1)


defop("baddbmm", _baddbmm, args=("self", "batch1", "batch2"), save=("batch1", "batch2"),
      grad_fn="BaddbmmBackward0", vjp=_baddbmm_vjp, decompose=_baddbmm_primitives,
      autocast="lower")

# ---- rounding ----------------------------------------------------------------------------


def _zero_grad(c, g):
    return (g.new_zeros(g.shape),)


defop("ceil", np.ceil, kind="elementwise", vjp=_zero_grad, grad_fn="CeilBackward0",
      methods=("ceil",), inplace=("ceil_",), functions=("ceil",))
defop("trunc", np.trunc, kind="elementwise", vjp=_zero_grad, grad_fn="TruncBackward0",
      methods=("trunc", "fix"), inplace=("trunc_", "fix_"), functions=("trunc", "fix"))
# (frac's methods refuse integer tensors, as PyTorch: llgrad/runtime/methods_tensor.py)
defop("frac", lambda x: x - np.trunc(x), kind="elementwise", vjp=lambda c, g: (g,),
      grad_fn="FracBackward0")


def _round_decimals(x, decimals):
    """PyTorch's round(decimals=d): nearbyint(x * 10^d) / 10^d, or for d < 0
    nearbyint(x / 10^-d) * 10^-d, in x's dtype (NumPy's round is half to even too; float16
    in float32, rounded once, as PyTorch's)."""
    if x.dtype == np.float16:
        return _round_decimals(x.astype(np.float32), decimals).astype(np.float16)
    p = x.dtype.type(10.0 ** abs(decimals))
    if decimals < 0:
        return np.round(x / p) * p
    return np.round(x * p) / p


def _round_decimals_primitives(node, emit):
    x, d = node.inputs[0], node.attrs["decimals"]
    p = 10.0 ** abs(d)
    if d < 0:
        return emit("mul", [emit("round", [emit("div", [x, p])]), p])
    return emit("div", [emit("round", [emit("mul", [x, p])]), p])


defop("round_decimals", _round_decimals, kind="elementwise", vjp=_zero_grad,
      grad_fn="RoundBackward1", decompose=_round_decimals_primitives)
