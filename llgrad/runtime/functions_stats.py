"""Statistics, integrals and distances PyTorch has and llgrad writes as compositions: cov /
corrcoef (PyTorch's Correlation.cpp, op for op), trapezoid / trapz / cumulative_trapezoid
(its Integration.cpp formulas), cdist and dist (vector norms of differences)."""
import warnings

from . import dtypes, grad_mode
from .autograd_function import Function
from .creation import full_op
from .dispatch import scalar_type_name as tname
from .functions import cat, export
from .functions_math import attach
from .linalg import vector_norm
from .shapes import broadcast_shapes, norm_dim
from .tensor import Tensor
from .node_names import torch_node
from .autocast_cast import autocast_float32


def cov(input, *, correction=1, fweights=None, aweights=None):
    """As torch.cov: the covariance of the rows (variables) over the columns (observations),
    weighted by fweights (integer counts) and aweights (floating weights)."""
    nd = input._data.ndim
    if nd > 2:
        raise RuntimeError("cov(): expected input to have two or fewer dimensions but got an "
                           f"input with {nd} dimensions")
    if input._dtype is dtypes.bool_:
        raise RuntimeError("cov(): bool dtype is not supported for input")
    x = input.reshape(1, -1) if nd < 2 else input
    n = x._data.shape[1]
    w = None
    for name, wt, ok, kind in (("fweights", fweights, lambda d: d._cat == 1, "integral"),
                               ("aweights", aweights, lambda d: d.is_floating_point,
                                "floating point")):
        if wt is None:
            continue
        if wt._data.ndim > 1:
            raise RuntimeError(f"cov(): expected {name} to have one or fewer dimensions but got "
                               f"{name} with {wt._data.ndim} dimensions")
        if not ok(wt._dtype):
            raise RuntimeError(f"cov(): expected {name} to have {kind} dtype but got {name} "
                               f"with {tname(wt._dtype)} dtype")
        if wt._data.size != n:
            raise RuntimeError(f"cov(): expected {name} to have the same numel as there are "
                               f"observations in the input but got {wt._data.size} != {n}")
        if n and bool((wt.amin() < 0).item()):
            raise RuntimeError(f"cov(): {name} cannot be negative")
        w = wt if w is None else w * wt
    if w is None:
        w_sum = n
        avg = x.sum(1) / n
        norm = n - correction
    else:
        w_sum = w.sum()
        if not bool((w_sum != 0).item()):
            raise RuntimeError("cov(): weights sum to zero, can't be normalized")
        avg = (x * w).sum(1) / w_sum
        norm = w_sum - correction * (w * aweights).sum() / w_sum \
            if aweights is not None and correction != 0 else w_sum - correction
    if bool(norm <= 0):
        warnings.warn("cov(): degrees of freedom is <= 0. Correction should be strictly less "
                      "than the number of observations.", UserWarning, stacklevel=2)
        norm = norm * 0
    xc = x - avg.unsqueeze(1)
    c = xc.mm((xc if w is None else xc * w).t())
    return (c / norm).squeeze()


def corrcoef(input):
    """As torch.corrcoef: the Pearson correlation coefficients of the rows, clipped to
    [-1, 1]."""
    if input._data.ndim > 2:
        raise RuntimeError("corrcoef(): expected input to have two or fewer dimensions but got "
                           f"an input with {input._data.ndim} dimensions")
    c = cov(input)
    if c._data.ndim == 0:
        return c / c
    std = c.diagonal().sqrt()
    c = c / std.reshape(-1, 1)
    c = c / std.reshape(1, -1)
    return c.clip(-1, 1)


def _trapezoid_args(y, x, dim, name):
    d = norm_dim(dim, y._data.ndim)
    if y._dtype is dtypes.bool_:
        raise RuntimeError(f"{name}: received a bool input for `y`, but bool is not supported")
    if not isinstance(x, Tensor):
        return d, None
    if x._dtype is dtypes.bool_:
        raise RuntimeError(f"{name}: received a bool input for `x`, but bool is not supported")
    nd = y._data.ndim
    if x._data.ndim == 1:
        if x._data.shape[0] != y._data.shape[d]:
            raise RuntimeError(f"{name}: There must be one `x` value for each sample point")
        x = x.reshape(tuple(x._data.shape[0] if j == d else 1 for j in range(nd)))
    elif x._data.ndim < nd:
        x = x.reshape((1,) * (nd - x._data.ndim) + tuple(x._data.shape))
    m = x._data.shape[d]
    return d, x.narrow(d, 1, m - 1) - x.narrow(d, 0, m - 1)


@torch_node(lambda y, x=None, *a, **k: "DivBackward1" if isinstance(x, Tensor) else "MulBackward1")
def trapezoid(y, x=None, *, dx=None, dim=-1):
    """As torch.trapezoid: the trapezoidal rule along dim, with sample points x or a
    constant spacing dx (1 by default)."""
    d = norm_dim(dim, y._data.ndim)
    n = y._data.shape[d] if y._data.ndim else 1
    if n == 0:                          # (NumPy's 0 for no samples)
        shape = tuple(s for j, s in enumerate(y._data.shape) if j != d)
        return full_op(shape, 0, y._dtype)
    d, dxt = _trapezoid_args(y, x, d, "trapezoid")
    if dxt is not None:
        return ((y.narrow(d, 0, n - 1) + y.narrow(d, 1, n - 1)) * dxt).sum(d) / 2.0
    return (y.sum(d) - (y.select(d, 0) + y.select(d, -1)) * 0.5) * (1 if dx is None else dx)


def trapz(y, x=None, *, dx=None, dim=-1):
    """As torch.trapz (torch.trapezoid)."""
    return trapezoid(y, x, dx=dx, dim=dim)


def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    """As torch.cumulative_trapezoid: the running trapezoidal rule along dim (one value
    fewer than the samples)."""
    d = norm_dim(dim, y._data.ndim)
    n = y._data.shape[d] if y._data.ndim else 1
    if n == 0:
        return y.clone()
    d, dxt = _trapezoid_args(y, x, d, "cumulative_trapezoid")
    pair = y.narrow(d, 0, n - 1) + y.narrow(d, 1, n - 1)
    if dxt is not None:
        return (pair * dxt).cumsum(d) / 2.0
    return ((1 if dx is None else dx) / 2.0 * pair).cumsum(d)


def inf_distance(diff, dim):
    """max |diff| along dim with the gradient of ATen's cdist / pdist backward: sign(diff) to
    every element at the maximum (linalg.vector_norm, and so pairwise_distance, splits it
    evenly among ties instead)."""
    out = vector_norm(diff.detach(), float("inf"), dim)
    if not diff.requires_grad:
        return out
    a = diff.abs()
    tied = a.where(a == out.unsqueeze(dim), 0.0).sum(dim)  # gradient sign(diff) at the ties
    # tied - tied is an exact 0 for a finite distance: the value stays vector_norm's
    return out + (tied - tied.detach()).where(out.isfinite(), 0.0)


def _cdist_mm(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """Whether ATen's cdist takes its matrix-product form (_euclidean_dist): p = 2 with
    use_mm_for_euclid_dist, or if_necessary beyond 25 rows, non-empty operands."""
    s1, s2 = x1._data.shape, x2._data.shape
    if len(s1) < 2 or len(s2) < 2:
        return False
    return p == 2 and (compute_mode == "use_mm_for_euclid_dist" or (
        compute_mode == "use_mm_for_euclid_dist_if_necessary" and max(s1[-2], s2[-2]) > 25)) \
        and x1._data.size > 0 and x2._data.size > 0 and s1[-1] > 0


def _euclidean_forward(x1, x2):
    """ATen's _euclidean_dist op for op: [-2 x1, |x1|^2, 1] @ [x2, 1, |x2|^2]^T (one matrix
    product of the rows), clamped at 0, its square root."""
    n1 = x1.square().sum(-1, keepdim=True)
    n2 = x2.square().sum(-1, keepdim=True)
    d2 = cat([x1 * -2, n1, full_op(n1.shape, 1, n1.dtype)], -1) @ \
        cat([x2, full_op(n2.shape, 1, n2.dtype), n2], -1).mT
    return d2.clamp_min(0).sqrt()


class _EuclideanDist(Function):
    """_euclidean_dist with ATen's _euclidean_dist_backward: ratio = grad / result (0 at a zero
    distance); x1 * ratio.sum(-1) - ratio @ x2 and x2 * ratio.sum(-2) - ratio^T @ x1."""
    generate_vmap_rule = True

    @staticmethod
    def forward(x1, x2):
        return _euclidean_forward(x1, x2)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs, output)

    @staticmethod
    def backward(ctx, grad):
        x1, x2, res = ctx.saved_tensors
        ratio = (grad / res).masked_fill(res == 0, 0)
        return (x1 * ratio.sum(-1, keepdim=True) - ratio @ x2,
                x2 * ratio.sum(-2).unsqueeze(-1) - ratio.mT @ x1)


_EuclideanDist._backward_cls.__name__ = "EuclideanDistBackward0"     # (PyTorch's node name)


def _euclidean_dist(x1, x2):
    """ATen's cdist_impl's matrix-product form: both operands expanded to the broadcast batch
    dims, _euclidean_dist, viewed (its ViewBackward0 node)."""
    s1, s2 = x1.shape, x2.shape
    batch = tuple(broadcast_shapes(s1[:-2], s2[:-2]))
    if s1[:-2] != batch:
        x1 = x1.expand(batch + s1[-2:])
    if s2[:-2] != batch:
        x2 = x2.expand(batch + s2[-2:])
    if not (grad_mode.is_grad_enabled() and (x1.requires_grad or x2.requires_grad)):
        return _euclidean_forward(x1, x2)
    out = _EuclideanDist.apply(x1, x2)
    return out.view(out.shape)


@torch_node(lambda *a, **k: "ViewBackward0" if _cdist_mm(*a, **k) else "CdistBackward0")
def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """As torch.cdist: the p-norm distances between the rows of x1 (..., P, M) and x2 (...,
    R, M), batch dims broadcast. For p = 2 beyond 25 rows (compute_mode's default) ATen's
    matrix-product form (_euclidean_dist: faster, less accurate near 0), else computed from
    the differences; the gradient at a zero distance is 0, as PyTorch's."""
    x1, x2 = autocast_float32(x1, x2)
    for name, t in (("X1", x1), ("X2", x2)):
        if t._data.ndim < 2:
            raise RuntimeError(f"cdist only supports at least 2D tensors, {name} got: "
                               f"{t._data.ndim}D")
    if x1._data.shape[-1] != x2._data.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: "
                           f"{x1._data.shape[-1]} X2: {x2._data.shape[-1]}")
    for name, t in (("X1", x1), ("X2", x2)):
        if not t._dtype.is_floating_point:
            raise RuntimeError(f"cdist only supports floating-point dtypes, {name} got: "
                               f"{tname(t._dtype)}")
    if p < 0:
        raise RuntimeError("cdist only supports non-negative p values")
    if compute_mode not in ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist",
                            "donot_use_mm_for_euclid_dist"):
        raise ValueError(f"{compute_mode} is not a valid value for compute_mode")
    if _cdist_mm(x1, x2, p, compute_mode):
        return _euclidean_dist(x1, x2)
    diff = x1.unsqueeze(-2) - x2.unsqueeze(-3)
    if p == float("inf"):
        return inf_distance(diff, -1)
    out = vector_norm(diff, p, -1)
    if p == 0 and diff.requires_grad:
        # a count of non-zeros: ATen's backward gives the inputs a zero gradient (not none)
        out = out + diff.sum(-1).where(full_op(out.shape, False, dtypes.bool_), 0.0)
    return out


@torch_node("DistBackward0")
def dist(input, other, p=2):
    """As torch.dist: the p-norm of input - other."""
    d = input - other
    if d._dtype._cat < 2:
        raise RuntimeError("norm(): input dtype should be either floating point or complex. "
                           f"Got {tname(d._dtype)} instead.")
    return vector_norm(d, p)


for _f in (cov, corrcoef, dist):
    attach(_f)
for _f in (trapezoid, trapz, cumulative_trapezoid, cdist):
    export(_f)
del _f
