"""Reductions, normalisers (softmax, log_softmax, logsumexp) and scans.

`dim` attributes arrive normalised: None (all dims) or a tuple of non-negative ints.
"""
import math
import warnings

import numpy as np

from . import np_cumsum, prod_grad
from .np_sums import cascade_sum, middle_sum
from .optable import conj, defop


def unreduce(g, shape, dim, keepdim):
    """Broadcast a reduced gradient back over the reduced dims (the VJP of a sum)."""
    if dim is not None and not keepdim:
        for d in sorted(dim):
            g = g.unsqueeze(d)
    return g.expand(shape)


def _count(shape, dim):
    n = 1
    for d in (range(len(shape)) if dim is None else dim):
        n *= shape[d]
    return n


def _by_dim(name0, name1):
    return lambda ins, at: name0 if at.get("dim") is None else name1


def _sum(x, dim=None, keepdim=False, dtype=None):
    if dtype is None and x.dtype.kind in "biu":
        dtype = np.int64
    r = cascade_sum(x, dim, keepdim, dtype)     # (a long axis NumPy adds in sequence)
    if r is not None:
        return r
    if dtype is None or dtype == x.dtype:
        r = middle_sum(x, dim, keepdim)
        if r is not None:
            return r
    if x.dtype == np.float16 and dtype in (None, np.float16):
        # PyTorch adds float16 in float32 and rounds once; NumPy does so only along a
        # contiguous axis (x.sum(0) of ones (4097, 3) would stop at 2048)
        return np.asarray(np.add.reduce(x, axis=dim, keepdims=keepdim,
                                        dtype=np.float32)).astype(np.float16)
    # np.add.reduce is np.sum without its Python-level dispatch (pairwise summation alike)
    return np.asarray(np.add.reduce(x, axis=dim, keepdims=keepdim, dtype=dtype))


defop("sum", _sum, kind="reduce", grad_fn=_by_dim("SumBackward0", "SumBackward1"),
      vjp=lambda c, g: (unreduce(g, c.shape(0), c.dim, c.keepdim),), functions=("sum",), complex=True)
def _mean(x, dim=None, keepdim=False):
    if x.size == 0:                 # nan, silently as PyTorch (NumPy warns: empty slice)
        s = np.sum(x, axis=dim, keepdims=keepdim)
        return np.full(np.shape(s), np.nan, s.dtype if s.dtype.kind == "f" else np.float64)
    r = cascade_sum(x, dim, keepdim)
    if r is not None:       # (np.mean's division: by its intp count, into the sum)
        return np.true_divide(r, np.intp(_count(x.shape, dim)), out=r, casting="unsafe")
    r = middle_sum(x, dim, keepdim)
    if r is not None:
        return np.true_divide(r, np.intp(x.shape[dim[0]]), out=r, casting="unsafe")
    if dim is None and not keepdim and type(x) is np.ndarray and x.dtype in _FOLD_MAX:
        # (np.mean's own steps for a float's full mean, its sum and the scalar's division
        # by the intp count, without its wrappers and errstate: ~5 us of a small eager mean;
        # NumPy's overflow warning is silenced as _sum's, by dispatch.py's filter)
        s = np.add.reduce(x, axis=None)
        return np.asarray(s.dtype.type(s / np.intp(x.size)))
    with np.errstate(over="ignore", invalid="ignore"):  # (PyTorch is silent; NumPy's
        # wrappers warn as numpy's modules, which dispatch.py's filter does not cover)
        return np.asarray(np.mean(x, axis=dim, keepdims=keepdim))


def _mean_grad(c, g):
    """g / count broadcast to the input's shape, in a fresh C-contiguous tensor as
    PyTorch's MeanBackward0 (expand then divide): the division on g's reduced elements, then
    a copy of the broadcast (the same quotients; a division over the broadcast took 4x the
    copy's time: a mean-squared loss's backward on a transformer's output)."""
    return unreduce(g / _count(c.shape(0), c.dim), c.shape(0), c.dim, c.keepdim).contiguous()


defop("mean", _mean,
      kind="reduce", grad_fn=_by_dim("MeanBackward0", "MeanBackward1"),
      vjp=lambda c, g: (_mean_grad(c, g),),
      functions=("mean",), complex=True)


def _prod_vjp(c, g):
    return prod_grad.prod_vjp(c, g, unreduce, conj)


def _prod(x, dim=None, keepdim=False):
    with np.errstate(over="ignore", invalid="ignore"):   # (as _mean's)
        if x.dtype == np.float16 and x.size:
            return _prod_half(x, dim, keepdim)
        return np.asarray(np.prod(x, axis=dim, keepdims=keepdim,
                                  dtype=np.int64 if x.dtype.kind in "biu" else None))


def _prod_half(x, dim, keepdim):
    # PyTorch multiplies float16 in float16 (300 * 300 * 0.001 is inf), one element after
    # another; NumPy's reduce carries float32 between the steps
    dims = tuple(range(x.ndim)) if dim is None else \
        tuple(d % x.ndim for d in ((dim,) if isinstance(dim, int) else dim))
    kept = [d for d in range(x.ndim) if d not in dims]
    rows = np.transpose(x, kept + list(dims)).reshape([x.shape[d] for d in kept] + [-1])
    r = np.multiply.accumulate(rows, axis=-1)[..., -1] if rows.shape[-1] else \
        np.ones(rows.shape[:-1], np.float16)
    return np.asarray(r.reshape([1 if d in dims else x.shape[d] for d in range(x.ndim)])
                      if keepdim else r)


defop("prod", _prod, kind="reduce", save=("self", "result"),
      grad_fn=_by_dim("ProdBackward0", "ProdBackward1"), vjp=_prod_vjp, functions=("prod",),
      complex=True, autocast="fp32")


def _evenly(c, g, nan_ties=False):
    """amax/amin: the gradient is shared evenly among the tied extremes; max/min
    (nan_ties): a NaN result shares it among the NaNs (PyTorch's evenly_distribute)."""
    shape = c.shape(0)
    r = unreduce(c.result, shape, c.dim, c.keepdim)
    mask = c.self == r
    if nan_ties:
        mask = mask.logical_or(c.self.isnan().logical_and(r.isnan()))
    dims = c.dim if c.dim is not None else tuple(range(len(shape)))
    count = mask.sum(dims, keepdim=True)
    return (unreduce(g, shape, c.dim, c.keepdim) * mask / count,)


for _n, _f, _gn in (("amax", np.max, "AmaxBackward0"), ("amin", np.min, "AminBackward0"),
                    ("max", np.max, "MaxBackward1"), ("min", np.min, "MinBackward1")):
    defop(_n, (lambda f: lambda x, dim=None, keepdim=False:
               np.asarray(f(x, axis=dim, keepdims=keepdim)))(_f),
          kind="reduce", save=("self", "result"), grad_fn=_gn, functions=(_n,),
          vjp=_evenly if _n.startswith("a") else
          (lambda c, g: _evenly(c, g, nan_ties=True)))


def _max_dim(pick, argpick):
    def impl(x, dim, keepdim=False):
        if x.ndim == 0:     # a 0-d tensor along its one dim: itself, at index 0
            return np.array(x), np.zeros((), dtype=np.int64)
        d = dim % x.ndim           # (a reshape: np.expand_dims normalises its axis slowly)
        idx = argpick(x, axis=d).reshape(x.shape[:d] + (1,) + x.shape[d + 1:])
        vals = np.take_along_axis(x, idx, axis=dim)
        if not keepdim:
            idx, vals = idx.squeeze(dim), vals.squeeze(dim)
        return np.array(vals), np.array(idx, dtype=np.int64)
    return impl


def _select_vjp(c, gs):
    # gs: gradients of (values, indices); the indices get none
    shape = c.shape(0)
    g = gs[0]
    if not shape:           # a 0-d input is its own extreme
        return (g,)
    idx, gk = c.result1, g
    if not c.keepdim:
        idx, gk = idx.unsqueeze(c.dim), g.unsqueeze(c.dim)
    return (g.new_zeros(shape).scatter_add(c.dim, idx, gk),)


def _nanargmax(x, axis):
    # PyTorch: the first maximal element; a NaN is the maximum.
    if x.dtype.kind in "biu":       # (no NaN to look for)
        return np.argmax(x, axis=axis)
    nan = np.isnan(x)
    if not nan.any():               # (the usual case: one pass, not three)
        return np.argmax(x, axis=axis)
    return np.where(nan.any(axis=axis), np.argmax(nan, axis=axis), np.argmax(x, axis=axis))


def _nanargmin(x, axis):
    if x.dtype.kind in "biu":
        return np.argmin(x, axis=axis)
    nan = np.isnan(x)
    if not nan.any():
        return np.argmin(x, axis=axis)
    return np.where(nan.any(axis=axis), np.argmax(nan, axis=axis), np.argmin(x, axis=axis))


defop("max_dim", _max_dim(np.max, _nanargmax), nout=2, kind="reduce", save=("result1",),
      grad_fn="MaxBackward0", vjp=_select_vjp)
defop("min_dim", _max_dim(np.min, _nanargmin), nout=2, kind="reduce", save=("result1",),
      grad_fn="MinBackward0", vjp=_select_vjp)
defop("argmax", lambda x, dim=None, keepdim=False: _arg(_nanargmax, x, dim, keepdim), kind="reduce",
      functions=("argmax",))
defop("argmin", lambda x, dim=None, keepdim=False: _arg(_nanargmin, x, dim, keepdim), kind="reduce",
      functions=("argmin",))
defop("all", lambda x, dim=None, keepdim=False: np.asarray(np.all(x, axis=dim, keepdims=keepdim)),
      kind="reduce", functions=("all",), complex=True)
defop("any", lambda x, dim=None, keepdim=False: np.asarray(np.any(x, axis=dim, keepdims=keepdim)),
      kind="reduce", functions=("any",), complex=True)


def _arg(fn, x, dim, keepdim):
    if x.ndim == 0:         # a 0-d tensor along its one dim: index 0, still 0-d
        return np.zeros((), dtype=np.int64)
    if dim is None:
        r = np.asarray(fn(x.reshape(-1), axis=0), dtype=np.int64)
        return r.reshape((1,) * x.ndim) if keepdim else r
    r = fn(x, axis=dim)
    return np.asarray(np.expand_dims(r, dim) if keepdim else r, dtype=np.int64)


def _var64(x, dim, correction, keepdim):
    # float32 in float64, as PyTorch (its CPU accumulation type) and native code: the
    # variance (and std) of values near float32's max is finite there
    # (complex: the real variance of the magnitudes of z - mean, NumPy's and PyTorch's)
    acc = {np.float32: np.float64, np.float16: np.float32,
           np.complex64: np.complex128}.get(x.dtype.type)   # (float16's)
    n = x.size if dim is None else \
        math.prod(x.shape[d] for d in ((dim,) if isinstance(dim, int) else dim))
    if n - correction > 0:
        with np.errstate(over="ignore", invalid="ignore"):   # (as _mean's)
            r = np.asarray(np.var(x, axis=dim, ddof=correction, keepdims=keepdim, dtype=acc))
        return r if dim is None or r.size <= 1 or acc is not None else \
            _zero_constant(r, x, dim, keepdim)
    with warnings.catch_warnings():     # the caller gave PyTorch's one warning already
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.asarray(np.var(x, axis=dim, ddof=correction, keepdims=keepdim, dtype=acc))


def _zero_constant(r, x, dim, keepdim):
    """r with 0 over the slices whose values are all equal: PyTorch's variance along dims
    (Welford's, whose running mean stays exactly that value) is 0 there, so std's gradient
    is masked to 0; NumPy's rounded mean leaves a few ulps squared. Only results within
    (256 eps |first value|)^2 of 0 are checked, so random data costs no pass over x. (A
    float32 / float16 / complex64 x is exact already (to 2**29 / 2**13 values): its mean,
    in the wider type, is.
    A reduction to one value is left: PyTorch's is two-pass too, and not 0 there.)"""
    dims = tuple(d % x.ndim for d in ((dim,) if isinstance(dim, int) else dim))  # (dim=-1)
    first = x[tuple(slice(0, 1) if a in dims else slice(None) for a in range(x.ndim))]
    f = np.abs(first if keepdim else first.reshape(r.shape))
    with np.errstate(over="ignore", invalid="ignore"):
        near = r <= np.square(256 * np.finfo(r.dtype).eps * f)
    if not near.any():
        return r
    same = np.all(x == first, axis=dims, keepdims=keepdim) & np.isfinite(f)  # (inf: NaN)
    return np.where(same, r.dtype.type(0), r)


def _as32(r, x):
    if x.dtype == np.complex64:
        return r.astype(np.float32)
    return r.astype(x.dtype) if x.dtype in (np.float32, np.float16) else r


def _var(x, dim=None, correction=1, keepdim=False):
    return _as32(_var64(x, dim, correction, keepdim), x)


def _var_grad(g, x, shape, dim, correction, keepdim):
    """PyTorch's var_backward: 2 / (n - correction) * g * (x - mean); over all elements with
    n <= correction, g times inf (nan where x equals the mean: inf * 0)."""
    if dim is None or not shape:
        dof = _count(shape, None) - correction
        if dof <= 0:
            return g * x.new_full(x.shape, math.inf).masked_fill(x == x.mean(), math.nan)
        return (2.0 / dof) * g * (x - x.mean())
    dims = dim if isinstance(dim, tuple) else (dim,)
    dof = _count(shape, dim) - correction
    scale = 2.0 / dof if dof else math.inf
    return scale * unreduce(g, shape, dim, keepdim) * (x - x.mean(dims, keepdim=True))


def _var_vjp(c, g):
    return (_var_grad(g, c.self, c.shape(0), c.dim, c.correction, c.keepdim),)


def _std_vjp(c, g):
    """PyTorch's std_backward: var's, of g / (2 * std) (0 where std is 0)."""
    r = c.result
    return (_var_grad((g / (r * 2)).masked_fill(r == 0, 0), c.self, c.shape(0), c.dim,
                      c.correction, c.keepdim),)


defop("var", _var, kind="reduce", save=("self",), grad_fn="VarBackward0", vjp=_var_vjp,
      functions=("var",), complex=True)
defop("std", lambda x, dim=None, correction=1, keepdim=False:
      _as32(np.sqrt(_var64(x, dim, correction, keepdim)), x),
      kind="reduce", save=("self", "result"), grad_fn="StdBackward0", vjp=_std_vjp,
      functions=("std",), complex=True)


def _logsumexp(x, dim, keepdim=False):
    m = np.max(x, axis=dim, keepdims=True, initial=-np.inf)   # -inf over an empty extent
    m = np.where(np.isfinite(m), m, 0).astype(x.dtype)
    # (float16 as PyTorch's op by op: each step rounded to float16, the sum added in
    # float32 -- _sum -- and rounded once)
    r = np.log(_sum(np.exp(x - m), (dim,) if isinstance(dim, int) else dim, keepdim=True)) + m
    return np.asarray(r if keepdim else np.squeeze(r, axis=dim))


defop("logsumexp", _logsumexp, kind="reduce", save=("self", "result"),
      grad_fn="LogsumexpBackward0",
      vjp=lambda c, g: (unreduce(g, c.shape(0), c.dim, c.keepdim)
                        * (c.self - unreduce(c.result, c.shape(0), c.dim, c.keepdim)).exp(),),
      functions=("logsumexp",))


def _kept_max(x, dim):
    """np.max(x, axis=dim, keepdims=True, initial=-inf) (-inf over an empty extent) as the
    ufunc's reduce that np.max calls: the same values without np.max's Python wrapper
    (~5 us of a small classifier's log_softmax). A last axis of 2 to 4 floats is folded
    column by column: NumPy's reduce runs an inner loop per row there (4.4 us for (128, 3),
    the fold 2 us), and the fold takes the same maxima; a NaN's sign and which of two zeros
    is kept differ with the host's vector loop in the reduce, and reach neither softmax's nor
    log_softmax's result (tests/runtime/test_eager_forward_sweep24.py)."""
    n = x.shape[-1] if x.ndim else 0
    if 2 <= n <= 4 and dim == x.ndim - 1 and x.dtype in _FOLD_MAX:
        r = np.maximum(x[..., :1], x[..., 1:2])
        for k in range(2, n):
            np.maximum(r, x[..., k:k + 1], out=r)
        return r
    return np.maximum.reduce(x, axis=dim, keepdims=True, initial=-np.inf)


_FOLD_MAX = (np.dtype(np.float32), np.dtype(np.float64))


def _softmax(x, dim):
    if x.dtype == np.float16:       # (PyTorch: float16 accumulates in float32, rounds once)
        return _softmax(x.astype(np.float32), dim).astype(np.float16)
    # initial=-inf: an empty input gives an empty result (np.max of nothing raises)
    e = np.exp(x - _kept_max(x, dim))
    return e / _kept_sum(e, dim)


def _log_softmax(x, dim):
    if x.dtype == np.float16 and x.ndim and dim == x.ndim - 1:
        # (PyTorch's last-dim kernel: in float32, but its sum and the sum's log rounded to
        # float16 on the way)
        f = x.astype(np.float32)
        s = f - _kept_max(f, dim)
        lse = np.log(_kept_sum(np.exp(s), dim).astype(np.float16).astype(np.float32))
        return (s - lse.astype(np.float16).astype(np.float32)).astype(np.float16)
    if x.dtype == np.float16:
        return _log_softmax(x.astype(np.float32), dim).astype(np.float16)
    s = x - _kept_max(x, dim)
    return s - np.log(_kept_sum(np.exp(s), dim))


def _kept_sum(e, dim):
    """np.sum(e, axis=dim, keepdims=True): in blocks along a long axis NumPy adds in sequence
    (np_sums.py), by einsum over a middle axis (middle_sum), else as the np.add.reduce that
    np.sum calls."""
    r = cascade_sum(e, (dim,), True)
    if r is None:
        r = middle_sum(e, (dim,), True)
    return np.add.reduce(e, axis=dim, keepdims=True) if r is None else r


def _in_float_for_half(rule):
    """A softmax VJP rule of (result, g, dim), run in float32 on float16 and rounded once,
    as PyTorch's backward kernels run it."""
    def vjp(c, g):
        r = c.result
        if r.element_size() == 2:
            return (rule(r.float(), g.float(), c.dim).to(r.dtype),)
        return (rule(r, g, c.dim),)
    return vjp


defop("softmax", _softmax, save=("result",), grad_fn="SoftmaxBackward0",
      vjp=_in_float_for_half(lambda r, g, d: r * (g - (g * r).sum(d, keepdim=True))),
      functions=("softmax",), eager_kernel="last_dim", eager_vjp="shaped")
defop("log_softmax", _log_softmax, save=("result",), grad_fn="LogSoftmaxBackward0",
      vjp=_in_float_for_half(lambda r, g, d: g - r.exp() * g.sum(d, keepdim=True)),
      functions=("log_softmax",), eager_kernel="last_dim", eager_vjp="shaped")


def _cumsum(x, dim, in_dtype=False):
    # np.cumsum of a 0-d array is 1-d: keep x's shape (float16 summed in float32, float32 in
    # float64: PyTorch's CPU accumulation types; in_dtype, multinomial's: in x's dtype)
    acc = (np.int64 if x.dtype.kind in "biu" else x.dtype if in_dtype
           else _SCAN_ACC.get(x.dtype.type))
    with np.errstate(over="ignore", invalid="ignore"):   # (as _mean's)
        r = np_cumsum.cumsum(x, dim, acc)
    if acc is not np.int64:     # (PyTorch's sum starts from +0: a leading -0 is +0)
        r += 0.0
    return r.reshape(x.shape).astype(np.int64 if acc is np.int64 else x.dtype, copy=False)


_SCAN_ACC = {np.float16: np.float32, np.float32: np.float64, np.complex64: np.complex128}


# PyTorch's reversed cumulative sum, flip-cumsum-flip (total - cumsum + g would cancel:
# g = (1e8, 1, 1) in float32 gave (1e8, 1, 1) for (1e8, 2, 1))
defop("cumsum", _cumsum, grad_fn="CumsumBackward0",
      vjp=lambda c, g: (g.flip(c.dim).cumsum(c.dim).flip(c.dim),), functions=("cumsum",),
      complex=True,
      # (NumPy's accumulate takes ~14 ns an element: the lowering's loop, the same bits, on
      # eager_shaped.py's kernels from 4096 elements)
      eager_kernel="shaped", eager_min_elements=4096)
