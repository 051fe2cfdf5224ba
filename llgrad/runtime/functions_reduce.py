"""Reductions and scans PyTorch has as kernels and llgrad writes as compositions of the op
table's ops: nansum / nanmean, count_nonzero, aminmax, var_mean / std_mean, logcumsumexp,
cummax / cummin, median / nanmedian, kthvalue, mode, quantile / nanquantile (llgrad.* and
Tensor methods).

The scans (logcumsumexp, cummax, cummin) are log2(n) rounds of the Hillis-Steele scan: each
round combines every element with the partial result s places earlier, so they trace to a
fixed graph of whole-tensor ops. The order statistics sort (stably) and gather, so their
gradients reach the elements they select, as PyTorch's do; median() and nanmedian() over all
elements spread the gradient evenly over the elements equal to the result, as PyTorch's
evenly_distribute_backward does."""
import math

from . import dtypes
from .creation import arange, full_op, tensor as _tensor
from .dtype_info import iinfo
from .dispatch import scalar_type_name as tname
from .functions import export, where
from .functions_math import _logaddexp, attach
from .methods_reduce import moment
from .reduce_args import NO_DIM, dim_given
from .shapes import norm_dim
from .tensor import Tensor
from .median_pick import eager_numpy, median_all, median_index, no_bool as _no_bool
from .nansum_grad import nan_to_zero
from .node_names import torch_node
from .return_types import named_result
from .vmap_fallback import meta_on_mismatch
from .autocast_cast import float32_list

return_cummax, return_cummin = named_result("cummax"), named_result("cummin")
return_median, return_nanmedian = named_result("median"), named_result("nanmedian")
return_kthvalue, return_mode = named_result("kthvalue"), named_result("mode")
return_aminmax = named_result("aminmax", ["min", "max"])


def _long_zero(x):
    return x.new_zeros((), dtype=dtypes.int64)


def _dims(dim, nd):
    if dim is None:
        return None
    return norm_dim(dim, nd) if isinstance(dim, int) else tuple(norm_dim(d, nd) for d in dim)


# ---- sums and means that skip nan, counts, extremes ---------------------------------------------

@torch_node("NansumBackward0")
def nansum(input, dim=None, keepdim=False, *, dtype=None):
    """As torch.nansum: the sum, nan counted as 0."""
    x = nan_to_zero(input) if input._dtype.is_floating_point else input
    return x.sum(_dims(dim, input._data.ndim), keepdim, dtype=dtype)


def nanmean(input, dim=None, keepdim=False, *, dtype=None):
    """As torch.nanmean: the mean of the elements that are not nan."""
    if not input._dtype.is_floating_point:
        raise RuntimeError("nanmean(): expected input to have floating point or complex dtype "
                           f"but got {tname(input._dtype)}")
    if dtype is not None and not dtype.is_floating_point:
        raise RuntimeError(f"nanmean(): could not infer output dtype. Optional dtype must be "
                           f"either a floating point or complex dtype. Got: {tname(dtype)}")
    dims = _dims(dim, input._data.ndim)
    return nansum(input, dims, keepdim, dtype=dtype) / (~input.isnan()).sum(dims, keepdim)


def count_nonzero(input, dim=None):
    """As torch.count_nonzero (int64)."""
    return (input != 0).sum(_dims(dim, input._data.ndim))


@torch_node("AminmaxBackward0")
def aminmax(input, *, dim=None, keepdim=False):
    """As torch.aminmax: (min, max), over dim or all elements."""
    nd = input._data.ndim
    if dim is None:
        if input._data.size == 0:
            raise RuntimeError("aminmax(): cannot compute aminmax over an empty dimension as "
                               "the operation has no identity.")
        lo, hi = input.amin(), input.amax()
        if keepdim:
            lo, hi = lo.reshape((1,) * nd), hi.reshape((1,) * nd)
        return return_aminmax(lo, hi)
    d = norm_dim(dim, nd)
    if nd and input._data.shape[d] == 0:
        raise IndexError(f"aminmax: Expected reduction dim {d} to have non-zero size.")
    return return_aminmax(input.amin(d, keepdim), input.amax(d, keepdim))


@torch_node("VarMeanBackward0")
def var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """As torch.var_mean: (var, mean) over dim."""
    if isinstance(dim, bool):
        dim, unbiased = None, dim
    return (moment(input, "var", dim, unbiased, keepdim, correction, "var_mean"),
            input.mean(_dims(dim, input._data.ndim), keepdim))


@torch_node("StdMeanBackward0")
def std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """As torch.std_mean: (std, mean) over dim."""
    if isinstance(dim, bool):
        dim, unbiased = None, dim
    return (moment(input, "std", dim, unbiased, keepdim, correction, "std_mean"),
            input.mean(_dims(dim, input._data.ndim), keepdim))


# ---- scans ------------------------------------------------------------------------------------

def _earlier(x, d, s, fill):
    """x shifted s places along d, the first s places filled: each element's partner in a
    round of the scan."""
    n, nd = x._data.shape[d], x._data.ndim
    first = (arange(n) < s).reshape((n,) + (1,) * (nd - 1 - d))
    return x.roll(s, d).masked_fill(first, fill)


@meta_on_mismatch
@torch_node("LogcumsumexpBackward0")
def logcumsumexp(input, dim):
    """As torch.logcumsumexp: log(cumsum(exp(input))) along dim, without overflow."""
    if not input._dtype.is_floating_point:
        raise NotImplementedError("\"logcumsumexp_out_cpu\" not implemented for "
                                  f"'{tname(input._dtype)}'")
    d = norm_dim(dim, input._data.ndim)
    n = input._data.shape[d] if input._data.ndim else 1
    if input._data.ndim == 0:
        return input.clone()
    if n <= 1:
        # PyTorch's one step from -inf makes -0.0 +0.0; its gradient is nan at +-inf and nan
        out = input + 0.0
        if input.requires_grad:
            bad = ~input.isfinite()
            x = input.masked_fill(~bad, 0)
            out = where(bad, x + (-(x * x)).exp(), out)
        return out
    if input._dtype in (dtypes.float16, dtypes.float32):   # (PyTorch's scan accumulates
        # float16 in float32 and float32 in float64, its CPU accumulation types)
        wide = dtypes.float32 if input._dtype is dtypes.float16 else dtypes.float64
        return logcumsumexp(input.to(wide), d).to(input._dtype)
    out, s = input.contiguous(), 1         # (PyTorch's scan result is row-major)
    while s < n:
        out = _logaddexp("logaddexp", out, _earlier(out, d, s, -math.inf), Tensor.exp, 1, False)
        s *= 2
    if input.requires_grad:
        # PyTorch's gradient (its reverse-logcumsumexp formula) is nan at an input of +inf
        # and where the result is -inf (an all -inf prefix): the scan's pairs of equal
        # infinities would pass 1 there. x + exp(-x * x) is x with a nan derivative at +-inf
        # (a nan earlier in the scan keeps the result nan, as PyTorch's, even at +inf)
        bad = (out == -math.inf) | ((input == math.inf) & (out == math.inf))
        x = input.masked_fill(~bad, 0)
        out = where(bad, x + (-(x * x)).exp(), out)
    return out


def _cum_extreme(input, dim, largest, tup):
    nd = input._data.ndim
    d = norm_dim(dim, nd)
    if nd == 0:
        return tup(input.clone(), _long_zero(input))
    shape = tuple(input._data.shape)
    n = shape[d]
    idx = arange(n).reshape((n,) + (1,) * (nd - 1 - d)).expand(shape)
    if n <= 1:
        return tup(input.clone(), idx.clone())
    dt = input._dtype
    if dt.is_floating_point:
        fill = -math.inf if largest else math.inf
    elif dt is dtypes.bool_:
        fill = not largest
    else:
        fill = iinfo(dt).min if largest else iinfo(dt).max
    v, i, s = input.contiguous(), idx, 1     # (PyTorch's scan result is row-major)
    while s < n:
        va, ia = _earlier(v, d, s, fill), i.roll(s, d)
        # the later partner wins ties (PyTorch's >= / <=); a nan wins and then stays
        take = (v >= va) if largest else (v <= va)
        if dt.is_floating_point:
            take = v.isnan() | (take & ~va.isnan())
        v, i = where(take, v, va), where(take, i, ia)
        s *= 2
    return tup(v, i)


@meta_on_mismatch
@torch_node("CummaxBackward0")
def cummax(input, dim):
    """As torch.cummax: (values, indices) of the running maximum along dim (the latest index
    on ties; a nan, once seen, stays)."""
    return _cum_extreme(input, dim, True, return_cummax)


@meta_on_mismatch
@torch_node("CumminBackward0")
def cummin(input, dim):
    """As torch.cummin: (values, indices) of the running minimum along dim (the latest index
    on ties; a nan, once seen, stays)."""
    return _cum_extreme(input, dim, False, return_cummin)


# ---- order statistics -------------------------------------------------------------------------

def _median_dim(x, dim, keepdim, ignore_nan, name, tup):
    nd = x._data.ndim
    d = norm_dim(dim, nd)
    n = x._data.shape[d] if nd else 1
    if n == 0:
        # (PyTorch's nanmedian says median() too; before the dtype's check, as there)
        raise IndexError(f"median(): Expected reduction dim {d} to have non-zero size.")
    _no_bool(x, "median_out")           # (nanmedian's kernel too)
    if nd == 0:
        return tup(x.clone(), _long_zero(x))
    if not ignore_nan and eager_numpy(x):
        # (the pick computed from the values, not a stable sort of every slice: 3-4x faster)
        idx = _tensor(median_index(x._data, d))
        values = x.gather(d, idx)
        if not keepdim:
            values, idx = values.squeeze(d), idx.squeeze(d)
        return tup(values, idx)
    s, i = x.sort(dim=d, stable=True)
    if x._dtype.is_floating_point:
        # sorting puts nan last: median takes the first nan, nanmedian the lower median of
        # the rest (the first nan when all are)
        nans = s.isnan().sum(d, keepdim=True)
        if ignore_nan:
            pos = where(nans < n, (n - 1 - nans).div(2, rounding_mode="floor"), 0)
        else:
            pos = where(nans > 0, n - nans, (n - 1) // 2)
        values, indices = s.gather(d, pos), i.gather(d, pos)
    else:           # (contiguous, as PyTorch's: not views of the sorted copy)
        values = s.narrow(d, (n - 1) // 2, 1).contiguous()
        indices = i.narrow(d, (n - 1) // 2, 1).contiguous()
    if not keepdim:
        values, indices = values.squeeze(d), indices.squeeze(d)
    return tup(values, indices)


@torch_node(lambda input, dim=NO_DIM, keepdim=None: "MedianBackward0" if dim is NO_DIM else "MedianBackward1")
def median(input, dim=NO_DIM, keepdim=None):
    """As torch.median: the lower median of all elements (nan if there is one), or
    (values, indices) along dim (the index of a stable sort's pick among equal values)."""
    if dim_given("median", dim, keepdim, False) is None:
        return median_all(input, False, "median")
    return _median_dim(input, dim, bool(keepdim), False, "median", return_median)


@torch_node(lambda input, dim=NO_DIM, keepdim=None: "NanmedianBackward0" if dim is NO_DIM else "NanmedianBackward1")
def nanmedian(input, dim=NO_DIM, keepdim=None):
    """As torch.nanmedian: median ignoring nan (nan only where all are)."""
    if dim_given("nanmedian", dim, keepdim, False) is None:
        return median_all(input, True, "nanmedian")
    return _median_dim(input, dim, bool(keepdim), True, "nanmedian", return_nanmedian)


@torch_node("KthvalueBackward0")
def kthvalue(input, k, dim=-1, keepdim=False):
    """As torch.kthvalue: (values, indices) of the k-th smallest element along dim (nan
    sorts last; among equal values, the one PyTorch's quickselect picks)."""
    nd = input._data.ndim
    d = norm_dim(dim, nd)
    n = input._data.shape[d] if nd else 1
    if nd and n == 0:
        raise IndexError(f"kthvalue(): Expected reduction dim {d} to have non-zero size.")
    if not 1 <= k <= n:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {d}")
    if nd == 0:
        return return_kthvalue(input.clone(), _long_zero(input))
    _no_bool(input, "kthvalue_cpu")     # (after the dim's and k's checks, as PyTorch's)
    values, indices = input._op("kthvalue", k=int(k), dim=d)
    if not keepdim:
        values, indices = values.squeeze(d), indices.squeeze(d)
    return return_kthvalue(values, indices)


@meta_on_mismatch
@torch_node("ModeBackward0")
def mode(input, dim=-1, keepdim=False):
    """As torch.mode: (values, indices) of the most frequent value along dim, the smallest
    on ties, at the position PyTorch's kernel picks among its occurrences."""
    nd = input._data.ndim
    d = norm_dim(dim, nd)
    if nd == 0:
        return return_mode(input.clone(), _long_zero(input))
    n = input._data.shape[d]
    if n == 0:
        raise IndexError(f"mode(): Expected reduction dim {d} to have non-zero size.")
    values, indices = input._op("mode", dim=d)
    if not keepdim:
        values, indices = values.squeeze(d), indices.squeeze(d)
    return return_mode(values, indices)


_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile_checks(x, q, interpolation, name):
    if not isinstance(q, Tensor) and not 0 <= q <= 1:
        raise RuntimeError(f"{name}() q must be in the range [0, 1] but got {q}")
    if x._data.size == 0:
        raise RuntimeError(f"{name}() input tensor must be non-empty")
    if isinstance(q, Tensor) and q._data.ndim > 1:
        raise RuntimeError(f"{name}() q must be a scalar or 1D tensor")
    if x._dtype not in (dtypes.float32, dtypes.float64):
        raise RuntimeError(f"{name}() input tensor must be either float or double dtype")
    if isinstance(q, Tensor) and q._dtype is not x._dtype:
        raise RuntimeError(f"{name}() q tensor must be same dtype as the input tensor")
    if interpolation not in _INTERPOLATIONS:
        raise RuntimeError(f"{name}() interpolation must be one of linear, lower, higher, "
                           f"midpoint or nearest, but got {interpolation}")
    if isinstance(q, Tensor) and bool(((q < 0) | (q > 1)).any()):
        raise RuntimeError(f"{name}() q values must be in the range [0, 1]")


def _quantile(x, q, dim, keepdim, interpolation, ignore_nan, name):
    """PyTorch's quantile_impl (aten/src/ATen/native/Sorting.cpp), op for op."""
    _quantile_checks(x, q, interpolation, name)
    nd, shape = x._data.ndim, tuple(x._data.shape)
    if dim is None:
        s = x.reshape(-1)
        out_shape = (1,) * nd if keepdim else ()
    else:
        d = norm_dim(dim, nd)
        s = x.permute([j for j in range(nd) if j != d] + [d]) if nd else x.reshape(1)
        out_shape = tuple(1 if j == d else n for j, n in enumerate(shape) if keepdim or j != d)
    s = s.sort(-1).values                                   # (*batch, n), nan last
    n = s._data.shape[-1]
    qv = q.reshape(-1) if isinstance(q, Tensor) else full_op((1,), q, x._dtype)
    if ignore_nan:       # ranks among the values that are not nan (0 where all are nan)
        ranks = qv * ((~s.isnan()).sum(-1, keepdim=True) - 1)
        ranks = ranks.masked_fill(ranks < 0, 0)
    else:                # the last rank (a nan) where there is a nan
        ranks = where(s.isnan().any(-1, keepdim=True), float(n - 1), qv * (n - 1))
    if ranks._data.ndim < s._data.ndim:
        ranks = ranks.expand(tuple(s._data.shape[:-1]) + (ranks._data.shape[-1],))
    if interpolation == "lower":
        ranks = ranks.floor()
    elif interpolation == "higher":
        ranks = ranks.ceil()
    elif interpolation == "nearest":
        ranks = ranks.round()
    below = ranks.long()
    out = s.gather(-1, below)
    if interpolation in ("linear", "midpoint"):
        weights = ranks.new_full(tuple(ranks._data.shape), 0.5) if interpolation == "midpoint" \
            else ranks - below
        out = out.lerp(s.gather(-1, ranks.ceil().long()), weights)
    if not isinstance(q, Tensor) or q._data.ndim == 0:
        return out.reshape(out_shape)
    k = out._data.ndim
    return out.permute([k - 1] + list(range(k - 1))).reshape((qv._data.shape[0],) + out_shape)


@float32_list
@meta_on_mismatch
@torch_node("SqueezeBackward4")     # (PyTorch's quantile_impl ends in a squeeze)
def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """As torch.quantile: the q-quantiles (q a number or a 1-D tensor) of all elements or
    along dim; with a nan the result is nan."""
    return _quantile(input, q, dim, keepdim, interpolation, False, "quantile")


@float32_list
@meta_on_mismatch
@torch_node("SqueezeBackward4")
def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """As torch.nanquantile: quantile ignoring nan (nan only where all are)."""
    return _quantile(input, q, dim, keepdim, interpolation, True, "quantile")


for _f in (nansum, nanmean, count_nonzero, aminmax, logcumsumexp, cummax, cummin, median,
           nanmedian, kthvalue, mode, quantile, nanquantile):
    attach(_f)
export(var_mean)
export(std_mean)
del _f
