"""torch.histogram / histogramdd (NumPy-counted: inside llgrad.compile a call runs
eagerly, but histogram with a bin count and its range given is traced), torch.gradient
(central differences as slices of the input: differentiable and traced), torch.binomial /
torch.poisson (drawn from llgrad's generator, which is not PyTorch's stream), and the
deprecated frobenius_norm / nuclear_norm."""
import collections
import numbers
import warnings

import numpy as np

from ..ir import torch_gamma
from . import trace_state
from .creation import _state, linspace
from .dtypes import float32, float64
from .dispatch import scalar_type_name as tname
from .functions import cat, export
from .functions_search import searchsorted
from .linalg import matrix_norm, vector_norm
from .node_names import no_derivative, no_derivative_from, rename
from .shapes import norm_dim, norm_dims
from .random_state import _value_dependent_draw
from .return_types import named_result
from .tensor import Tensor
from .user_frames import user_stacklevel
from .vmap_fallback import per_sample, values_read


def _untraceable(what):
    tracer = trace_state.state.tracer
    if tracer is not None:
        tracer.untraceable(what)




_HISTOGRAM = named_result("histogram", ["hist", "bin_edges"])
_HISTOGRAMDD = named_result("histogramdd", ["hist", "bin_edges"])


_C = collections.defaultdict(lambda: "?", float16="c10::Half", float32="float",
                            float64="double", int64="long int", int32="int")


def _fmt(v):
    return f"{v:g}"


def _edges(x, d, bins, rng, dt):
    """Dimension d's bin edges (a tensor of dtype dt) from an int count or a tensor."""
    if isinstance(bins, Tensor):
        if bins._dtype is not dt:
            raise RuntimeError(f"torch.histogramdd: input tensor and bins tensors should have "
                               f"the same dtype, but got input with dtype {_C[dt.name]} and "
                               f"bins for dimension {d} with dtype {_C[bins._dtype.name]}")
        return bins
    if bins <= 0:
        raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {bins} for "
                           f"dimension {d}")
    col = x[:, d]
    if rng is not None:
        lo, hi = float(rng[0]), float(rng[1])
    elif col.size:
        lo, hi = float(col.min()), float(col.max())
    else:
        lo, hi = 0.0, 1.0
    if lo > hi:
        raise RuntimeError(f"torch.histogramdd: min should not exceed max, but got min "
                           f"{_fmt(lo)} max {_fmt(hi)} for dimension {d}")
    if not (np.isfinite(lo) and np.isfinite(hi)):
        raise RuntimeError(f"torch.histogramdd: dimension {d}'s range [{_fmt(lo)}, {_fmt(hi)}] "
                           f"is not finite")
    if lo == hi:
        lo, hi = lo - 0.5, hi + 0.5
    return linspace(lo, hi, bins + 1, dtype=dt)


def _histogramdd(input, bins, range_, weight, density, what):
    dt = input._dtype
    if not dt.is_floating_point:
        raise NotImplementedError(f"\"histogramdd\" not implemented for '{tname(dt)}'")
    _untraceable(what)
    x = np.asarray(input._data, np.float64)
    n = x.shape[-1] if x.ndim else 1
    x = x.reshape(-1, n)
    if weight is not None and tuple(weight._data.shape) != tuple(input._data.shape[:-1]):
        raise RuntimeError(f"torch.histogramdd: if weight tensor is provided it should have "
                           f"the same shape as the input tensor excluding its innermost "
                           f"dimension, but got input with shape {list(input._data.shape)} and "
                           f"weight with shape {list(weight._data.shape)}")
    per_dim = list(bins) if isinstance(bins, (list, tuple)) else [bins] * n
    if len(per_dim) != n:       # (PyTorch's checks, before NumPy's ValueError)
        raise RuntimeError(f"torch.histogramdd: expected {n} sequences of bin edges for a "
                           f"{n}-dimensional histogram but got {len(per_dim)}"
                           if per_dim and isinstance(per_dim[0], Tensor) else
                           "histogramdd: The size of bins must be equal to the innermost "
                           "dimension of the input.")
    ranges = [None] * n if range_ is None else \
        [tuple(range_[2 * d:2 * d + 2]) for d in range(n)]
    edges = [_edges(x, d, b, r, dt) for d, (b, r) in enumerate(zip(per_dim, ranges))]
    np_edges = [np.asarray(e._data, np.float64) for e in edges]
    w = None if weight is None else np.asarray(weight._data, np.float64).reshape(-1)
    keep = np.ones(x.shape[0], bool)
    for d, e in enumerate(np_edges):
        if e.size < 2 or e[-1] < e[0]:
            keep &= False
        else:
            keep &= (x[:, d] >= e[0]) & (x[:, d] <= e[-1])
    if all(e.size >= 2 and e[-1] >= e[0] for e in np_edges):
        hist, _ = np.histogramdd(x[keep], bins=np_edges,
                                 weights=None if w is None else w[keep])
    else:
        hist = np.zeros([max(e.size - 1, 0) for e in np_edges])
    if density:
        total = hist.sum()
        widths = np.ones_like(hist)
        for d, e in enumerate(np_edges):
            shape = [1] * n
            shape[d] = -1
            widths = widths * np.diff(e).reshape(shape)
        hist = hist / (total * widths)
    return Tensor._from_array(np.ascontiguousarray(hist, dtype=dt.np)), edges


@per_sample
def histogram(input, bins=100, *, range=None, weight=None, density=False):  # noqa: A002
    """As torch.histogram: (hist, bin_edges) of input's elements in bins equal bins over
    range (the data's own by default) or between the edges of a bins tensor; weight and
    density as NumPy's."""
    if not isinstance(bins, (numbers.Integral, Tensor)) or isinstance(bins, bool):
        raise TypeError(f"histogram() received an invalid combination of arguments - got "
                        f"(Tensor, {type(bins).__name__}), but expected one of:")
    if trace_state.state.tracer is not None and range is not None and \
            not isinstance(bins, Tensor) and input._dtype.is_floating_point and (
                weight is None or weight._dtype is input._dtype and
                tuple(weight._data.shape) == tuple(input._data.shape)):
        hist, edges = _traced_histogram(input, bins, range, weight, density)
        return _HISTOGRAM(no_derivative_from(hist, (input, weight), "histogram"),
                          no_derivative_from(edges, (input, weight), "histogram"))
    hist, edges = _histogramdd(input.reshape(-1, 1), [bins], range,
                               None if weight is None else weight.reshape(-1), density,
                               "histogram")
    if weight is not None and tuple(weight._data.shape) != tuple(input._data.shape):
        raise RuntimeError("torch.histogram: weight should have the same shape as input")
    # (a bins tensor comes back as a new contiguous copy: histogramdd returns it itself)
    edges = edges[0].detach().clone(memory_format="contiguous_format") if edges[0] is bins \
        else edges[0]
    # (PyTorch has no derivative for histogram: with an input or weight requiring grad both
    # results require grad, a backward through either raises)
    grads = (input, weight)
    return _HISTOGRAM(no_derivative_from(hist, grads, "histogram"),
                      no_derivative_from(edges, grads, "histogram"))


def _traced_histogram(input, bins, range_, weight, density):
    """histogram inside llgrad.compile, a bin count over a given range (a confidence
    histogram over [0, 1]): eager's edges; each element's bin by searchsorted on them as
    NumPy's histogramdd finds it (the last edge itself in the last bin, elements outside
    the range or NaN counted with weight 0), summed in float64 by index_add_."""
    edges = _edges(np.empty((0, 1)), 0, bins, range_, input._dtype)    # (eager's checks)
    x = input.reshape(-1)
    keep = (x >= edges[0]) & (x <= edges[-1])
    idx = (searchsorted(edges, x, right=True) - 1).clamp(0, bins - 1)
    w = keep.to(float64) if weight is None else \
        weight.reshape(-1).to(float64).where(keep, x.new_zeros((), dtype=float64))
    hist = x.new_zeros((bins,), dtype=float64).index_add_(0, idx, w)
    if density:
        e = edges.to(float64)
        hist = hist / (hist.sum() * (e[1:] - e[:-1]))
    return hist.to(input._dtype), edges


@values_read
def histogramdd(input, bins, *, range=None, weight=None, density=False):  # noqa: A002
    """As torch.histogramdd: (hist, bin_edges) of the points of input's last dimension, with
    bins an int, an int per dimension or a tensor of edges per dimension."""
    hist, edges = _histogramdd(input, bins, range, weight, density, "histogramdd")
    grads = (input, weight)     # (no derivative in PyTorch: results requiring grad that raise)
    return _HISTOGRAMDD(no_derivative_from(hist, grads, "_histogramdd_from_bin_cts"),
                        tuple(no_derivative_from(e, grads, "_histogramdd_bin_edges")
                              for e in edges))


def _sl(x, d, start, stop=None):
    key = [slice(None)] * x._data.ndim
    key[d] = slice(start, stop)
    return x[tuple(key)]


def _gradient_along(x, d, h, edge_order):
    n = x._data.shape[d]
    if isinstance(h, Tensor):
        dx = h[1:] - h[:-1]
        shape = [1] * x._data.ndim
        shape[d] = -1
        dx1, dx2 = dx[:-1], dx[1:]
        a = (-dx2 / (dx1 * (dx1 + dx2))).reshape(shape)
        b = ((dx2 - dx1) / (dx1 * dx2)).reshape(shape)
        c = (dx1 / (dx2 * (dx1 + dx2))).reshape(shape)
        center = a * _sl(x, d, 0, n - 2) + b * _sl(x, d, 1, n - 1) + c * _sl(x, d, 2)
        if edge_order == 1:
            first = (_sl(x, d, 1, 2) - _sl(x, d, 0, 1)) / dx[0]
            last = (_sl(x, d, n - 1) - _sl(x, d, n - 2, n - 1)) / dx[-1]
        else:
            d0, d1, e1, e2 = dx[0], dx[1], dx[-1], dx[-2]
            first = (-(2.0 * d0 + d1) / (d0 * (d0 + d1)) * _sl(x, d, 0, 1)
                     + (d0 + d1) / (d0 * d1) * _sl(x, d, 1, 2)
                     + (-d0) / (d1 * (d0 + d1)) * _sl(x, d, 2, 3))
            last = (e1 / (e2 * (e1 + e2)) * _sl(x, d, n - 3, n - 2)
                    - (e1 + e2) / (e1 * e2) * _sl(x, d, n - 2, n - 1)
                    + (2 * e1 + e2) / (e1 * (e1 + e2)) * _sl(x, d, n - 1))
        return cat([first, center, last], d)
    center = (_sl(x, d, 2) - _sl(x, d, 0, n - 2)) / h / 2
    if edge_order == 1:
        first = (_sl(x, d, 1, 2) - _sl(x, d, 0, 1)) / h
        last = (_sl(x, d, n - 1) - _sl(x, d, n - 2, n - 1)) / h
    else:
        first = (_sl(x, d, 0, 1) * -1.5 + _sl(x, d, 1, 2) * 2 + _sl(x, d, 2, 3) * -0.5) / h
        last = (_sl(x, d, n - 3, n - 2) * 0.5 + _sl(x, d, n - 2, n - 1) * -2
                + _sl(x, d, n - 1) * 1.5) / h
    return cat([first, center, last], d)


def gradient(input, *, spacing=1, dim=None, edge_order=1):
    """As torch.gradient: the derivative of input estimated by central differences along each
    dim (second-order accurate inside; first- or second-order at the edges, edge_order),
    with unit, scalar, per-dim or coordinate (tensor) spacing; a tuple, one tensor per dim."""
    nd = input._data.ndim
    dims = list(range(nd)) if dim is None else \
        ([norm_dim(dim, nd)] if isinstance(dim, int) else list(dim))
    if dim is not None and not isinstance(dim, int):
        norm_dims(dims, nd)
        dims = [norm_dim(d, nd) for d in dims]
    if isinstance(spacing, (list, tuple)):
        if len(spacing) != len(dims):
            if dim is None:
                raise RuntimeError(f"torch.gradient expected spacing to be unspecified, a "
                                   f"scalar, or a list of length equal to 'self.dim() = {nd}', "
                                   f"since dim argument was not given, but got a list of "
                                   f"length {len(spacing)}")
            raise RuntimeError(f"torch.gradient expected spacing to be unspecified, a scalar or "
                               f"it's spacing and dim arguments to have the same length, but "
                               f"got a spacing argument of length {len(spacing)} and a dim "
                               f"argument of length {len(dims)}.")
        kinds = {isinstance(s, Tensor) for s in spacing}
        if len(kinds) > 1:
            first = isinstance(spacing[0], Tensor)
            k = next(i for i, s in enumerate(spacing) if isinstance(s, Tensor) != first)
            raise TypeError(f"expected Tensor as element {k} in argument 1, but got "
                            f"{type(spacing[k]).__name__}")
        hs = list(spacing)
    else:
        hs = [spacing.item() if isinstance(spacing, Tensor) else
              1 if spacing is None else spacing] * len(dims)     # (None: PyTorch's unit)
    if edge_order not in (1, 2):
        raise RuntimeError("torch.gradient only supports edge_order=1 and edge_order=2.")
    for d in dims:
        if input._data.shape[d] < edge_order + 1:
            raise RuntimeError("torch.gradient expected each dimension size to be at least "
                               "edge_order+1")
    for d, h in zip(dims, hs):
        if isinstance(h, Tensor) and h._data.shape[0] != input._data.shape[d]:
            raise RuntimeError(f"The size of tensor a ({h._data.shape[0] - 2}) must match the "
                               f"size of tensor b ({input._data.shape[d] - 2}) at non-singleton "
                               f"dimension {d}")
    return tuple(_gradient_along(input, d, h, edge_order) for d, h in zip(dims, hs))


@values_read
def poisson(input, generator=None):
    """As torch.poisson: a draw from Poisson(rate) per element, drawn as ATen's CPU kernel
    draws them (PyTorch's numbers for a seed; ir/torch_gamma.py); its gradient is zero.
    Traced, the rng_poisson op of the generator state and the rates (the draws' count
    depends on them): compiled calls replay eager's draws."""
    if not input._dtype.is_floating_point:      # (float16 too: rates read as doubles)
        raise NotImplementedError(f"\"poisson_cpu\" not implemented for '{tname(input._dtype)}'")
    _value_dependent_draw("poisson", generator)
    draw = torch_gamma.poisson(_state(generator), np.ascontiguousarray(input._data))
    out = Tensor._from_array(draw)
    tracer = trace_state.state.tracer
    if generator is None and tracer is not None:
        tracer.random("rng_poisson", out, input.detach())
    if input.requires_grad:
        out = rename(out + input * 0, "PoissonBackward0")
    return out


@values_read
def binomial(count, prob, generator=None):
    """As torch.binomial: a draw from Binomial(count, prob) per element, drawn as ATen's CPU
    kernel draws them (PyTorch's numbers for a seed; ir/torch_gamma.py; traced: the
    rng_binomial op); a backward through it raises, as PyTorch defines no derivative."""
    if not isinstance(count, Tensor):
        raise TypeError(f"binomial(): argument 'count' (position 1) must be Tensor, not "
                        f"{type(count).__name__}")
    if not count._dtype.is_floating_point:
        raise ValueError(f"binomial only supports floating-point dtypes for count, got: "
                         f"{tname(count._dtype).capitalize()}")
    if prob._dtype is not count._dtype:
        raise RuntimeError(f"Found dtype {tname(prob._dtype).capitalize()} but expected "
                           f"{tname(count._dtype).capitalize()}")
    if count._dtype not in (float32, float64):
        raise NotImplementedError(f"\"binomial_cpu\" not implemented for "
                                  f"'{tname(count._dtype)}'")
    _value_dependent_draw("binomial", generator)
    n, p = np.broadcast_arrays(count._data, prob._data)
    out = Tensor._from_array(torch_gamma.binomial(_state(generator), n, p))
    tracer = trace_state.state.tracer
    if generator is None and tracer is not None:
        tracer.random("rng_binomial", out, count.detach(), prob.detach())
    if count.requires_grad or prob.requires_grad:
        out = no_derivative(out + (count * 0 + prob * 0), "binomial")
    return out


def frobenius_norm(input, dim, keepdim=False):
    """As torch.frobenius_norm (deprecated): vector_norm(input, 2, dim, keepdim) over at most
    two dims."""
    warnings.warn("at::frobenius_norm is deprecated and it is just left for JIT compatibility. "
                  "It will be removed in a future PyTorch release. Please use "
                  "`linalg.vector_norm(A, 2., dim, keepdim)` instead", UserWarning,
                  stacklevel=user_stacklevel())
    dims = [dim] if isinstance(dim, int) else list(dim)
    if len(dims) > 2:
        raise RuntimeError(f"Expected at most 2 dimensions, but got {len(dims)} dimensions "
                           f"instead.")
    return rename(vector_norm(input, 2, dims, keepdim), "NormBackward1")


def nuclear_norm(input, dim=None, keepdim=False):
    """As torch.nuclear_norm (deprecated): matrix_norm(input, 'nuc', dim, keepdim), dim the
    last two by default (nuclear_norm(input, keepdim) as well)."""
    warnings.warn("at::nuclear_norm is deprecated and it is just left for JIT compatibility. "
                  "It will be removed in a future PyTorch release. Please use "
                  "`linalg.matrix_norm(A, 'nuc', dim, keepdim)` instead", UserWarning,
                  stacklevel=user_stacklevel())
    if isinstance(dim, bool):
        dim, keepdim = None, dim
    out = matrix_norm(input, "nuc", (-2, -1) if dim is None else tuple(dim), keepdim)
    # (PyTorch unsqueezes the kept dims, then permutes them back)
    return rename(out, "PermuteBackward0") if keepdim else out


for _fn in (histogram, histogramdd, gradient, poisson, binomial, frobenius_norm, nuclear_norm):
    export(_fn)
Tensor.histogram = histogram
