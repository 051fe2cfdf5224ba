"""Views (results alias their input), and the strided-buffer ops of view VJPs and CopySlices
(the ops that move data, cat, gather, scatter_add, ..., are ops_data_movement's)."""
import numpy as np

from .optable import defop
from .geometry import (contiguous_strides, expand_strides, geometry_overlaps, geometry_span,
                       unsqueeze_strides, view_strides)


class _Interface:
    """Lets NumPy build an array from a raw pointer, shape and strides (as_strided does)."""

    def __init__(self, interface, base):
        self.__array_interface__ = interface
        self.base = base


def strided_view(x, shape, strides, elem_shift=0, dtype=None):
    """A view of x's memory with the given shape and element strides, starting elem_shift
    elements from x's first element (elements of dtype, x's if None). Caller checks bounds."""
    dt = x.dtype if dtype is None else np.dtype(dtype)
    itemsize, ai = dt.itemsize, x.__array_interface__
    interface = {"version": 3, "typestr": dt.str, "descr": dt.descr,
                 "data": (ai["data"][0] + elem_shift * itemsize, ai["data"][1]),
                 "shape": tuple(shape), "strides": tuple(s * itemsize for s in strides)}
    return np.asarray(_Interface(interface, x))


def relative_geometry(view_impl, in_shape, attrs):
    """Geometry (shape, strides, offset) of a view op applied to a C-contiguous input of
    in_shape, found by running the view's own NumPy impl on a 1-byte dummy (no memory is
    touched: only pointers and strides are computed)."""
    dummy = strided_view(np.zeros(1, np.uint8), in_shape, contiguous_strides(in_shape))
    v = view_impl(dummy, **attrs)
    if not isinstance(v, np.ndarray) or (v.size and not np.shares_memory(v, dummy)):
        raise AssertionError(f"{view_impl.__name__} did not return a view")
    off = v.__array_interface__["data"][0] - dummy.__array_interface__["data"][0]
    return (tuple(v.shape), tuple(v.strides), off)


def view_vjp(impl):
    """The VJP of a view that picks elements (select, slice, diagonal, ...): scatter the
    gradient into zeros of the input's shape."""
    def vjp(c, g):
        shape = c.shape(0)
        geom = relative_geometry(impl, shape, c.attrs)
        n = 1
        for d in shape:
            n *= d
        return (g._op("strided_scatter", geom=geom, span=n).reshape(shape),)
    return vjp


# ---- views ------------------------------------------------------------------------------

def _reshape_view(x, shape):
    out = x.reshape(shape, copy=False)      # (the method: np.reshape's wrapper costs ~2 us)
    return out if 1 not in out.shape or x.flags.c_contiguous and 1 not in x.shape or \
        not x.size or not x.ndim else _restride(x, out, view_strides(x.shape, x.strides,
                                                                       out.shape))


def _restride(x, out, strides):
    """out, a view of x, with PyTorch's strides (NumPy's differ in size-1 dims)."""
    return out if strides is None or out.strides == strides else \
        np.lib.stride_tricks.as_strided(x, out.shape, strides, writeable=x.flags.writeable)


defop("view", _reshape_view, kind="view", grad_fn="ViewBackward0",
      vjp=lambda c, g: (g.reshape(c.shape(0)),), complex=True)
# reshape of a non-contiguous input that can still be viewed (PyTorch's _reshape_alias)
defop("_reshape_alias", _reshape_view, kind="view", grad_fn="ReshapeAliasBackward0",
      vjp=lambda c, g: (g.reshape(c.shape(0)),), complex=True)
defop("_unsafe_view", lambda x, shape: np.reshape(x, shape), kind="view",
      grad_fn="UnsafeViewBackward0", vjp=lambda c, g: (g.reshape(c.shape(0)),), complex=True)
defop("alias", lambda x: x.view(), kind="view", grad_fn="AliasBackward0",
      vjp=lambda c, g: (g,), complex=True)
defop("transpose", lambda x, dim0, dim1: np.swapaxes(x, dim0, dim1) if x.ndim else x.view(),
      kind="view",        # (a 0-dim tensor takes dims 0 and -1, as PyTorch's)
      grad_fn="TransposeBackward0", vjp=lambda c, g: (g.transpose(c.dim0, c.dim1),),
      functions=("transpose", "swapaxes"), complex=True)
defop("t", lambda x: x.T, kind="view", grad_fn="TBackward0", vjp=lambda c, g: (g.t(),),
      functions=("t",), complex=True)
defop("permute", lambda x, dims: np.transpose(x, dims), kind="view", grad_fn="PermuteBackward0",
      vjp=lambda c, g: (g.permute(tuple(int(i) for i in np.argsort(c.dims))),),
      functions=("permute",), complex=True)


def sum_to_shape(g, shape):
    """Sum a broadcast gradient back to `shape` (the VJP of expand)."""
    if tuple(g.shape) == tuple(shape):
        return g
    lead = g.ndim - len(shape)
    dims = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape)
                                      if n == 1 and g.shape[lead + i] != 1)
    if dims:
        g = g.sum(dims, keepdim=True)
    return g.reshape(shape) if lead or tuple(g.shape) != tuple(shape) else g


def _broadcast_view(x, size):
    """np.broadcast_to(x, size) for a contiguous x (the gradient of every sum and mean), as
    np.ndarray over x's memory (PyTorch's strides), without broadcast_to's nditer (~5 us):
    writeable when no element repeats, as _expand's as_strided. None: not that case."""
    lead = len(size) - x.ndim
    if lead < 0 or not x.size or 0 in size or not x.flags.forc:
        return None
    # (geometry.expand_strides' rule, inlined on this path of every sum's gradient)
    repeats, strides, nxt = False, [0] * len(size), x.itemsize if x.ndim else 0
    for i in range(len(size) - 1, -1, -1):
        n, k = size[i], i - lead
        m, s = (x.shape[k], x.strides[k]) if k >= 0 else (1, nxt)
        if m != n and (m != 1 or n < 0):
            return None         # not a broadcast: broadcast_to's error
        repeats, strides[i] = repeats or n > 1 and m == 1, s if n == m else 0
        nxt = strides[i] * n
    out = np.ndarray(size, x.dtype, x, 0, tuple(strides))
    if repeats:
        out.setflags(write=False)
    return out


def _expand(x, size):
    out = _broadcast_view(x, size)
    if out is not None:
        return out
    out = np.broadcast_to(x, size)
    # broadcast_to is read-only, which is what makes an in-place write through an expanded
    # view raise (runtime/dispatch.py); but when no element repeats (only dims of size 1
    # added or kept) PyTorch lets it write, so give a writable view of x then
    writeable = x.flags.writeable and (out.size == 0 or all(s or n <= 1 for n, s in
                                                            zip(out.shape, out.strides)))
    strides = expand_strides(x.shape, x.strides, out.shape, x.itemsize)
    if writeable or strides != out.strides:
        out = np.lib.stride_tricks.as_strided(x, out.shape, strides, writeable=writeable)
    return out


defop("expand", _expand, kind="view", grad_fn="ExpandBackward0",
      vjp=lambda c, g: (sum_to_shape(g, c.shape(0)),), complex=True)


def _squeeze(x, dim=None):
    if dim is None:
        return np.squeeze(x)
    dims = (dim,) if isinstance(dim, int) else dim
    return np.squeeze(x, axis=tuple(d for d in dims if x.shape[d] == 1))


defop("squeeze", _squeeze, kind="view", vjp=lambda c, g: (g.reshape(c.shape(0)),),
      grad_fn=lambda ins, at: "SqueezeBackward0" if at.get("dim") is None else
      "SqueezeBackward1" if isinstance(at["dim"], int) else "SqueezeBackward2",
      functions=("squeeze",), complex=True)
# squeeze_ of a fresh result (1-D @ 2-D matmul ends so): PyTorch's in-place squeeze has
# nodes of its own (SqueezeBackward3/4/5); here it runs out of place and the caller drops
# the result's base (in PyTorch it is the same tensor, not a view)
defop("squeeze_", _squeeze, kind="view", vjp=lambda c, g: (g.reshape(c.shape(0)),),
      grad_fn=lambda ins, at: "SqueezeBackward3" if at.get("dim") is None else
      "SqueezeBackward4" if isinstance(at["dim"], int) else "SqueezeBackward5", complex=True)
defop("unsqueeze", lambda x, dim: _restride(x, x.reshape(x.shape[:dim] + (1,) + x.shape[dim:]),
      unsqueeze_strides(x.shape, x.strides, dim, x.itemsize)), kind="view",
      grad_fn="UnsqueezeBackward0", vjp=lambda c, g: (g.reshape(c.shape(0)),),
      functions=("unsqueeze",), complex=True)


def _slice(x, dim, start, end, step):
    return x[(slice(None),) * dim + (slice(start, end, step),)]


def _select(x, dim, index):
    # (the Ellipsis keeps a 0-d result a view and stands for the dims after dim: no list of
    # ndim slices to build, a third of the time of a small select)
    return x[_FULL * (dim if dim >= 0 else dim + x.ndim) + (index, Ellipsis)]


_FULL = (slice(None),)


def _diagonal(x, offset=0, dim1=0, dim2=1):
    if dim1 == dim2:        # (PyTorch's words; NumPy's moveaxis would name `source`)
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    y = np.moveaxis(x, (dim1, dim2), (-2, -1))
    y = y[..., :, offset:] if offset >= 0 else y[..., -offset:, :]
    n = max(min(y.shape[-2], y.shape[-1]), 0)
    return np.lib.stride_tricks.as_strided(
        y, y.shape[:-2] + (n,), y.strides[:-2] + (y.strides[-2] + y.strides[-1],),
        writeable=y.flags.writeable)


defop("slice", _slice, kind="view", grad_fn="SliceBackward0", vjp=view_vjp(_slice), complex=True)
defop("select", _select, kind="view", grad_fn="SelectBackward0", vjp=view_vjp(_select),
      functions=("select",), complex=True)
defop("diagonal", _diagonal, kind="view", grad_fn="DiagonalBackward0", vjp=view_vjp(_diagonal),
      functions=("diagonal",), complex=True)


def _as_strided(x, size, stride, storage_offset, in_strides, in_offset):
    return strided_view(x, size, stride, storage_offset - in_offset)


def _as_strided_vjp(c, g):
    # Geometries are relative to the storage: scatter into a buffer laid out as the
    # storage, then read the input's elements back out of it.
    view, base = (c.size, c.stride, c.storage_offset), (c.shape(0), c.in_strides, c.in_offset)
    span = max(geometry_span(*view), geometry_span(*base))
    buf = g._op("strided_scatter", geom=view, span=span)
    if geometry_overlaps(base[0], base[1]):     # (an element's copies share its gradient)
        buf = buf / g.new_ones(base[0])._op("strided_scatter", geom=base, span=span).clamp_min(1)
    return (buf._op("strided_gather", geom=base),)


defop("as_strided", _as_strided, kind="view", grad_fn="AsStridedBackward0", vjp=_as_strided_vjp,
      functions=("as_strided",), complex=True)


def _unbind(x, dim):
    if not x.ndim:          # (a 0-d tensor's dim 0 is read as its one elsewhere; not here)
        raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
    return tuple(_select(x, dim, i) for i in range(x.shape[dim]))


def _split(x, sizes, dim, with_sizes=False):
    out, start = [], 0
    for n in sizes:
        out.append(_slice(x, dim, start, start + n, 1))
        start += n
    return tuple(out)


defop("unbind", _unbind, nout=None, kind="view", grad_fn="UnbindBackward0",
      vjp=lambda c, gs: (gs[0]._op("stack", *gs[1:], dim=c.dim),), functions=("unbind",), complex=True)
defop("split", _split, nout=None, kind="view",
      grad_fn=lambda ins, at: "SplitWithSizesBackward0" if at.get("with_sizes") else "SplitBackward0",
      vjp=lambda c, gs: (gs[0]._op("cat", *gs[1:], dim=c.dim),), functions=("split",), complex=True)


# ---- flat-buffer ops behind view VJPs and CopySlices ------------------------------------
# A geometry (shape, strides, offset) addresses elements of a 1-D buffer.


def _flat_index(geom):
    # built from the innermost dimension outwards, each step one outer sum of the index so
    # far with one dimension's offsets (about one pass over the result, where adding each
    # dimension's offsets to a full-size array made a full pass per dimension)
    shape, strides, offset = geom
    idx = np.full((), offset, dtype=np.int64)
    for n, s in zip(reversed(shape), reversed(strides)):
        idx = np.add.outer(np.arange(n, dtype=np.int64) * s, idx)
    return idx


def check_geometry(geom, n):
    """Refuse a geometry that reaches outside a buffer of n elements (these ops write
    through raw strides, so this check is what keeps them in bounds)."""
    shape, strides, offset = geom
    if any(d == 0 for d in shape):
        return
    if offset < 0 or any(s < 0 for s in strides) or geometry_span(shape, strides, offset) > n:
        raise IndexError(f"strided access {geom} is out of bounds for a buffer of {n} elements")


def _strided_scatter(x, geom, span):
    check_geometry(geom, span)
    buf = np.zeros(span, dtype=x.dtype)
    if geometry_overlaps(geom[0], geom[1]):
        # (1-D index and values: NumPy's add.at has a fast path for them, ten times its
        # n-d speed; the same elements added in the same C order)
        np.add.at(buf, _flat_index(geom).reshape(-1), np.ascontiguousarray(x).reshape(-1))
    else:
        strided_view(buf, geom[0], geom[1], geom[2])[...] = x
    return buf


def _strided_gather(buf, geom):
    check_geometry(geom, buf.shape[0])
    # the geometry addresses a dense buffer; a gradient buffer may be strided (an expanded
    # gradient has stride 0), so make it dense before reading through raw strides
    buf = np.ascontiguousarray(buf)
    return np.array(strided_view(buf, geom[0], geom[1], geom[2]), copy=True)


def _strided_put(buf, values, geom):
    check_geometry(geom, buf.shape[0])
    out = np.array(buf, copy=True)
    strided_view(out, geom[0], geom[1], geom[2])[...] = values
    return out


defop("strided_scatter", _strided_scatter, grad_fn="StridedScatterBackward0",
      vjp=lambda c, g: (g._op("strided_gather", geom=c.geom),), complex=True)
defop("strided_gather", _strided_gather, grad_fn="StridedGatherBackward0",
      vjp=lambda c, g: (g._op("strided_scatter", geom=c.geom, span=c.shape(0)[0]),), complex=True)
defop("strided_put", _strided_put, args=("self", "values"), grad_fn="StridedPutBackward0",
      promote=(0, 1),
      vjp=lambda c, g: (g._op("strided_put", g.new_zeros(()), geom=c.geom) if c.needs(0) else None,
                        g._op("strided_gather", geom=c.geom) if c.needs(1) else None), complex=True)
