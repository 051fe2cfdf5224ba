"""Tensor methods of the positional ops (tril, triu, flip, roll, repeat, repeat_interleave,
diag, diag_embed, unfold), cumprod, outer, baddbmm and the rounding family: PyTorch's
arguments, checks and error messages, then one op of the table (llgrad/ir/ops_tensor.py)."""
import numbers
import warnings

import numpy as np

from ..ir import OPS
from ..ir.optable import method_doc
from . import dtypes, trace_state
from .dispatch import call
from .inplace import call_inplace
from .dispatch import scalar_type_name as tname
from .functions import _method_fn
from .methods_reduce import _same_dtype, c_type, no_bool_scan
from .reduce_dtype import cast_for
from .shapes import norm_dim, unpack_shape
from .tensor import Tensor
from .vmap_fallback import per_sample, values_read
from .autocast_cast import autocast_lower
from .creation import arange
from .functions_search import searchsorted


def _def(name, fn):
    fn.__name__ = name
    fn.__doc__ = fn.__doc__ or method_doc(name)     # ("As torch.Tensor.<name>.")
    setattr(Tensor, name, fn)


def _dims(self, dims):
    nd = self._data.ndim
    out = tuple(norm_dim(d, nd) for d in dims)
    for d in out:
        if out.count(d) > 1:
            raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
    return out


def _at_least_2d(self, what):
    if self._data.ndim < 2:
        raise RuntimeError(f"{what}: input tensor must have at least 2 dimensions")


def tril(self, diagonal=0):
    _at_least_2d(self, "tril")
    return self._op("tril", diagonal=int(diagonal))


def triu(self, diagonal=0):
    _at_least_2d(self, "triu")
    return self._op("triu", diagonal=int(diagonal))


def tril_(self, diagonal=0):
    _at_least_2d(self, "tril")
    return call_inplace(OPS["tril"], self, (self,), {"diagonal": int(diagonal)})


def triu_(self, diagonal=0):
    _at_least_2d(self, "triu")
    return call_inplace(OPS["triu"], self, (self,), {"diagonal": int(diagonal)})


def flip(self, *dims):
    dims = _dims(self, unpack_shape(dims))
    return self._op("flip", dims=dims if self._data.ndim else ())   # (0-dim: dim 0 / -1 ok)


def fliplr(self):
    if self._data.ndim < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return flip(self, 1)


def flipud(self):
    if self._data.ndim < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return flip(self, 0)


def roll(self, shifts, dims=None):
    shifts = (int(shifts),) if isinstance(shifts, numbers.Integral) else tuple(map(int, shifts))
    if not shifts:          # (else roll((), ()) would return the tensor unrolled)
        raise RuntimeError("`shifts` required")
    if dims is None or (isinstance(dims, (tuple, list)) and not dims and len(shifts) == 1):
        if len(shifts) != 1:
            raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:0")
        return self._op("roll", shifts=shifts, dims=None)
    dims = (dims,) if isinstance(dims, (int, np.integer)) else tuple(dims)
    if len(shifts) != len(dims):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, "
                           f"dims:{len(dims)}")
    nd = self._data.ndim
    if not nd:              # (PyTorch's roll does not read a 0-d tensor's dim 0 as its one)
        raise IndexError(f"Dimension specified as {dims[0]} but tensor has no dimensions")
    return self._op("roll", shifts=shifts, dims=tuple(norm_dim(d, nd) for d in dims))


def repeat(self, *sizes):
    reps = unpack_shape(sizes)
    if len(reps) < self._data.ndim:
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number "
                           "of dimensions of tensor")
    shape = (1,) * (len(reps) - self._data.ndim) + self._data.shape
    out = [r * n for r, n in zip(reps, shape)]
    if any(n < 0 for n in out):
        bad = next(n for n in out if n < 0)
        raise RuntimeError(f"Trying to create tensor with negative dimension {bad}: {out}")
    return self._op("repeat", repeats=reps)


def repeat_interleave(self, repeats=None, dim=None, *, output_size=None):
    """An int: PyTorch's composite (unsqueeze, expand, a contiguous clone, view). A tensor
    of repeats: index_select with the indices it makes, a shape that depends on its values
    (inside a compiled function their sum is a value guard)."""
    if repeats is None:                     # llgrad.repeat_interleave(repeats): the indices
        return _repeat_indices(self)
    t = self.reshape(-1) if dim is None else self
    d = 0 if dim is None else norm_dim(dim, t._data.ndim)
    if not isinstance(repeats, Tensor):
        r = int(repeats)
        if r < 0:
            raise RuntimeError("Repeats must be non-negative")
        shape = t._data.shape
        if not shape:
            t, shape = t.reshape(1), (1,)
        big = shape[:d + 1] + (r,) + shape[d + 1:]
        out = shape[:d] + (shape[d] * r,) + shape[d + 1:]
        e = t.unsqueeze(d + 1).expand(big)
        return e._op("clone", memory_format="contiguous").view(out)
    n = t._data.shape[d] if t._data.ndim else 1
    return t.index_select(d, _repeated_positions(repeats, n, d))


@per_sample         # (under vmap: each sample's repeats, and so its indices, its own)
def _repeated_positions(repeats, n, d):
    _check_repeats_dtype(repeats)
    if repeats._data.ndim > 1:
        raise RuntimeError("repeats must be 0-dim or 1-dim tensor")
    if repeats._data.ndim and repeats._data.shape[0] not in (n, 1):
        raise RuntimeError(f"repeats must have the same size as input along dim, but got "
                           f"repeats.size(0) = {repeats._data.shape[0]} and input.size({d}) = {n}")
    if trace_state.state.tracer is not None:
        return _repeat_indices(repeats.expand(n))
    reps = np.broadcast_to(repeats._data, (n,))
    return _repeat_indices(Tensor._from_array(np.array(reps)))


def _check_repeats_dtype(repeats):
    if repeats._dtype not in (dtypes.int64, dtypes.int32):
        raise NotImplementedError(f'"repeat_interleave_cpu" not implemented for '
                                  f"'{tname(repeats._dtype)}'")


@values_read
def _repeat_indices(repeats):
    _check_repeats_dtype(repeats)
    tracer = trace_state.state.tracer
    if tracer is not None:
        if repeats._data.ndim != 1:
            tracer.untraceable("repeat_interleave with a tensor of repeats (a data-dependent "
                               "shape)")
        return _repeat_indices_traced(repeats)
    r = repeats._data
    if r.ndim != 1 or r.dtype.kind not in "iu":
        raise RuntimeError("repeat_interleave only accept 1D vector as repeat")
    if (r < 0).any():
        raise RuntimeError("repeats can not be negative")
    return Tensor._from_array(np.repeat(np.arange(r.shape[0], dtype=r.dtype), r))  # (torch's dtype)


def _repeat_indices_traced(repeats):
    """The indices while tracing (a graph's batch vector, arange(B).repeat_interleave(n)):
    their number, the repeats' sum, and the repeats' sign are value guards of the trace;
    index j belongs to the first position whose running total exceeds j."""
    if repeats._data.size and not (repeats.min() >= 0).item():
        raise RuntimeError("repeats can not be negative")
    total = int(repeats.sum().item())
    return searchsorted(repeats.cumsum(0), arange(total), right=True,
                        out_int32=repeats._dtype is dtypes.int32)


def cumprod(self, dim, dtype=None):
    no_bool_scan("cumprod", dtype, self)
    t = cast_for(self, dtype)
    r = t._op("cumprod", dim=norm_dim(dim, self._data.ndim))
    return r if dtype is None or r._dtype is t._dtype else r.to(t._dtype)


def cumprod_(self, dim, dtype=None):
    return call_inplace(OPS["cumprod"], self, (self,), {"dim": norm_dim(dim, self._data.ndim)})


def diag(self, diagonal=0):
    nd = self._data.ndim
    if nd == 1:
        return self._op("diag_embed", offset=int(diagonal), dim1=0, dim2=1)
    if nd == 2:
        return self._op("diagonal_copy", offset=int(diagonal), dim1=0, dim2=1)
    raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {nd}D")


def diag_embed(self, offset=0, dim1=-2, dim2=-1):
    nd = self._data.ndim + 1
    d1, d2 = norm_dim(dim1, nd), norm_dim(dim2, nd)
    if self._data.ndim == 0:
        raise IndexError("Dimension out of range (expected to be in range of [-1, 0], but got "
                         f"{dim1})")
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return self._op("diag_embed", offset=int(offset), dim1=d1, dim2=d2)


def outer(self, vec2):
    for what, t in (("self", self), ("vec2", vec2)):
        if t._data.ndim != 1:
            raise RuntimeError(f"outer: Expected 1-D argument {what}, but got "
                               f"{t._data.ndim}-D")
    return self.reshape(-1, 1) * vec2


def _baddbmm_check(self, b1, b2):
    for what, t in (("batch1", b1), ("batch2", b2)):
        if t._data.ndim != 3:
            raise RuntimeError(f"{what} must be a 3D tensor")
    a, b = b1._data.shape, b2._data.shape
    if a[0] != b[0] or a[2] != b[1]:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{a[0]}, {a[2]}] but got: [{b[0]}, {b[1]}].")
    if self._dtype is not b1._dtype:
        raise RuntimeError(f"Input dtypes must be the same, got: input {c_type(self._dtype)}, "
                           f"batch1: {c_type(b1._dtype)}, batch2: {c_type(b2._dtype)}")
    _same_dtype(b1, b2, "bmm")
    shape = (a[0], a[1], b[2])
    try:
        if np.broadcast_shapes(self._data.shape, shape) != shape:
            raise ValueError
    except ValueError:
        # (expand's check, from the last dimension: the first that differs and is not 1)
        have = (1,) * (3 - self._data.ndim) + self._data.shape[-3:]
        d = next((i for i in (2, 1, 0) if have[i] not in (1, shape[i])), 2)
        raise RuntimeError(f"The expanded size of the tensor ({shape[d]}) must match the "
                           f"existing size ({have[d]}) "
                           f"at non-singleton dimension {d}.  Target sizes: {list(shape)}.  "
                           f"Tensor sizes: {list(self._data.shape)}") from None


def baddbmm(self, batch1, batch2, *, beta=1, alpha=1):
    self, batch1, batch2 = autocast_lower(self, batch1, batch2)
    _baddbmm_check(self, batch1, batch2)
    return call(OPS["baddbmm"], (self, batch1, batch2),
                dtypes.int_scales(batch1._dtype, beta, alpha))


def baddbmm_(self, batch1, batch2, *, beta=1, alpha=1):
    _baddbmm_check(self, batch1, batch2)
    return call_inplace(OPS["baddbmm"], self, (self, batch1, batch2),
                        dtypes.int_scales(batch1._dtype, beta, alpha))


def unfold(self, dimension, size, step):
    nd = self._data.ndim
    d = norm_dim(dimension, nd)
    n = self._data.shape[d] if nd else 1
    if size > n:
        raise RuntimeError(f"maximum size for tensor at dimension {d} is {n} but size is {size}")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    if size < 0:
        raise RuntimeError(f"size is {size} but must be >= 0")
    return self._op("unfold", dimension=d, size=int(size), step=int(step))


def _float_only(self, name):
    if not self._dtype.is_floating_point:
        raise NotImplementedError(f'"{name}_cpu" not implemented for \'{tname(self._dtype)}\'')


def frac(self):
    _float_only(self, "frac")
    return self._op("frac")


def frac_(self):
    _float_only(self, "frac")
    return call_inplace(OPS["frac"], self, (self,), {})


def round(self, decimals=None):
    if decimals is None:
        return self._op("round")
    _float_only(self, "round")
    return self._op("round_decimals", decimals=int(decimals))


def round_(self, decimals=None):
    if decimals is None:
        return call_inplace(OPS["round"], self, (self,), {})
    _float_only(self, "round")
    return call_inplace(OPS["round_decimals"], self, (self,), {"decimals": int(decimals)})


def __contains__(self, element):
    """`element in t`: whether any element of t equals it, as PyTorch's (a tensor element is
    compared broadcast: [1, 2] in [[1, 2], [3, 4]] is True)."""
    if isinstance(element, (Tensor, numbers.Number)):
        return bool((element == self).any().item())
    raise RuntimeError("Tensor.__contains__ only supports Tensor or scalar, but you passed in a "
                       f"{type(element)}.")


for _n, _f in (("__contains__", __contains__), ("tril", tril), ("triu", triu), ("tril_", tril_),
               ("triu_", triu_),
               ("flip", flip), ("fliplr", fliplr), ("flipud", flipud), ("roll", roll),
               ("repeat", repeat), ("repeat_interleave", repeat_interleave),
               ("cumprod", cumprod), ("cumprod_", cumprod_), ("diag", diag),
               ("diag_embed", diag_embed), ("outer", outer), ("ger", outer),
               ("baddbmm", baddbmm), ("baddbmm_", baddbmm_), ("unfold", unfold),
               ("frac", frac), ("frac_", frac_), ("round", round), ("round_", round_)):
    _def(_n, _f)
for _n in ("flip", "fliplr", "flipud", "roll", "repeat_interleave", "cumprod", "diag",
           "outer", "ger", "baddbmm", "frac"):
    _method_fn(_n)


def _T(self):
    """The dimensions reversed (a view), as torch.Tensor.T (with PyTorch's deprecation
    warning when there are not two)."""
    nd = self._data.ndim
    if nd == 0:
        warnings.warn("Tensor.T is deprecated on 0-D tensors. This function is the identity "
                      "in these cases.", UserWarning, stacklevel=2)
    elif nd != 2:
        warnings.warn("The use of `x.T` on tensors of dimension other than 2 to reverse their "
                      "shape is deprecated and it will throw an error in a future release. "
                      "Consider `x.mT` to transpose batches of matrices or `x.permute(*torch."
                      "arange(x.ndim - 1, -1, -1))` to reverse the dimensions of a tensor.",
                      UserWarning, stacklevel=2)
    return self.permute(tuple(reversed(range(nd))))     # (a new view even of 0 or 1 dims)


Tensor.T = property(_T)
