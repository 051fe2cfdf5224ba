"""NumPy-side VJPs of where, index, logsumexp, pow by a number and of the views that pick
elements (select, slice, diagonal, unfold) for the common eager backward
(fast_vjp_views._plain: no create_graph, tracer, vmap, forward AD, profiler or autocast;
float32/float64 gradients). A recurrence written in
Python (a CRF's forward algorithm under torch.where, a CTC loss over time steps, an RNN's
x[t]) makes one of these per step, and their rules spent more on the dispatch of their
two or three ops (and a view's geometry, found again per call on a dummy array) than on the
arithmetic. Each runs what its rule runs, in the rule's order, on the implementations the
dispatcher would call (plain_call: run_impl, the result laid out as call() lays it out), so
values, layouts and aliasing are the rule's; anything else returns None and the rule runs."""
import numpy as np

from ..ir import ops_index, ops_pow, ops_reduce, ops_select, ops_shape, ops_tensor  # noqa: F401
from ..ir.optable import OPS, c_order
from ..ir.ops_shape import relative_geometry
from . import dispatch
from .dtypes import bool_, int32, int64
from .fast_vjp_views import _plain
from .memory_layout import iterator_layout
from .meta_tensor import is_meta
from .node import fast_vjps
from .tensor import Tensor

_new, _view_of = Tensor._from_array, Tensor._view_of
_WHERE, _NOT = OPS["where"], OPS["logical_not"]
_SCATTER, _VIEW = OPS["strided_scatter"], OPS["view"]
_INDEX, _INDEX_PUT = OPS["index"], OPS["index_put"]
_LSE, _UNSQUEEZE, _EXPAND = OPS["logsumexp"], OPS["unsqueeze"], OPS["expand"]
_SUB, _EXP, _MUL, _POW = OPS["sub"], OPS["exp"], OPS["mul"], OPS["pow"]
_INDEX_DTYPES = (int64, int32, bool_)


def plain_call(op, inputs, attrs):
    """dispatch.call's result of a non-view, single-output op with grad mode off, on plain
    (real, non-bfloat16, non-meta) tensors and small Python numbers, outside any trace, vmap,
    profile, forward AD or autocast (what _plain checks): run_impl, then the result's
    layout as call() gives it."""
    info = dispatch._infos.get(op) or dispatch._info(op)
    out = dispatch.run_impl(op, inputs, attrs)
    if info.contig:
        return _new(c_order(out))
    return _new(iterator_layout(out, inputs, op) if info.layout else out)


def _bool_tensor(t):
    return type(t) is Tensor and t._dtype is bool_ and not is_meta(t)


def where_vjp(node, g):
    """(None, g.where(condition, 0), g.where(condition.logical_not(), 0)) (the rule: each
    wanted gradient's condition unpacked as it unpacks it), or None."""
    meta = node._in_meta[0]
    if not _plain(g) or meta is None or meta[1] is not bool_:
        return None             # (decided before any unpack: an unpack hook runs once)
    gs = go = None
    if node.needs(1):
        cond = node.condition
        if not _bool_tensor(cond):
            return None
        gs = plain_call(_WHERE, (cond, g, 0), {})
    if node.needs(2):
        cond = node.condition
        if not _bool_tensor(cond):
            return None
        go = plain_call(_WHERE, (plain_call(_NOT, (cond,), {}), g, 0), {})
    return None, gs, go


def index_vjp(node, g):
    """zeros(input's shape).index_put(g, *indices, spec=..., accumulate=True) (the rule: its
    new_zeros, then the index_put the dispatcher runs), or None."""
    if not _plain(g):
        return None
    for meta in node._in_meta[1:]:      # (the indices: checked before they are unpacked)
        if meta is None or meta[1] not in _INDEX_DTYPES:
            return None
    attrs = {"spec": node.attrs["spec"], "accumulate": True}     # (_with_counts's)
    counts = node.attrs.get("counts")
    if counts is not None:
        attrs["counts"] = counts
    zeros = _new(np.zeros(node._in_meta[0][0], g._data.dtype))
    indices = node.indices
    for t in indices:
        if type(t) is not Tensor or is_meta(t):
            return None
    return (plain_call(_INDEX_PUT, (zeros, g, *indices), attrs),)


# (op, input shape, attrs) -> relative_geometry's answer, a function of those alone (found on
# a dummy array); bounded, not an LRU: a model's picks repeat a few geometries every step
_geometries = {}
_GEOMETRY_LIMIT = 4096
_KEYED = (int, type(None))


def _geometry(op, shape, attrs):
    items = tuple(attrs.items())
    for _, v in items:
        if type(v) not in _KEYED:
            return None
    key = (op, shape, items)
    geom = _geometries.get(key)
    if geom is None:
        if len(_geometries) >= _GEOMETRY_LIMIT:
            _geometries.clear()
        geom = _geometries[key] = relative_geometry(op.impl, shape, attrs)
    return geom


def pick_vjp(node, g):
    """ops_shape.view_vjp's rule, g._op("strided_scatter", geom=..., span=n).reshape(shape):
    the scatter on run_impl, the reshape the view of its C-contiguous result that the
    dispatcher makes; or None."""
    if not _plain(g) or dispatch.stand_ins.active:
        return None
    shape = node._in_meta[0][0]
    geom = _geometry(node._op, shape, node.attrs)
    if geom is None:
        return None
    n = 1
    for d in shape:
        n *= d
    flat = plain_call(_SCATTER, (g,), {"geom": geom, "span": n})
    a = flat._data
    if not a.flags.c_contiguous:
        return None
    return (_view_of(_VIEW.impl(a, shape=shape), flat),)


def _unreduced(t, shape, dims):
    """ops_reduce.unreduce(t, shape, dims, keepdim) as the dispatcher makes its views of t
    (dims: the reduced dims to unsqueeze, sorted; () with keepdim)."""
    a = t._data
    for d in dims:
        a = _UNSQUEEZE.impl(a, dim=d)
        t = _view_of(a, t)
    return _view_of(_EXPAND.impl(a, size=shape), t)


def logsumexp_vjp(node, g):
    """unreduce(g) * (self - unreduce(result)).exp() (the rule: its views, sub, exp and
    mul on the dispatcher's implementations), or None."""
    shape, dt = node._in_meta[0]
    if not _plain(g) or g._dtype is not dt:
        return None
    dim, keepdim = node.attrs.get("dim"), node.attrs.get("keepdim")
    if dim is None or keepdim:
        dims = ()
    else:
        dims = sorted(dim)
        if any(type(d) is not int or not 0 <= d < len(shape) for d in dims):
            return None
    big = _unreduced(g, shape, dims)
    x = node.self
    r = node.result
    if type(x) is not Tensor or type(r) is not Tensor or x._dtype is not dt or \
            r._dtype is not dt or is_meta(x) or is_meta(r):
        return None
    diff = plain_call(_SUB, (x, _unreduced(r, shape, dims)), {"alpha": 1})
    return (plain_call(_MUL, (big, plain_call(_EXP, (diff,), {})), {}),)


def pow_vjp(node, g):
    """(g * (e * self ** (e - 1)), None) for a Python number exponent e other than 0 (the
    rule: its pow, the product by e as e * t dispatches it, conj of a real tensor itself,
    the product by g), or None."""
    e = node._saved.get("exponent")     # (a number is saved as it is: no unpack)
    meta = node._in_meta[0]
    if type(e) not in (int, float) or e == 0 or not _plain(g) or meta is None or \
            meta[1] is not g._dtype or not node.needs(0):
        return None
    x = node.self
    if type(x) is not Tensor or x._dtype is not g._dtype or is_meta(x):
        return None
    scaled = plain_call(_MUL, (plain_call(_POW, (x, e - 1), {}), e), {})
    return plain_call(_MUL, (g, scaled), {}), None


def clear_geometries():
    """Forget the cached geometries (the tests' reset)."""
    _geometries.clear()


fast_vjps[_WHERE] = where_vjp
fast_vjps[_INDEX] = index_vjp
fast_vjps[_LSE] = logsumexp_vjp
fast_vjps[_POW] = pow_vjp
for _name in ("select", "slice", "diagonal", "unfold"):
    fast_vjps[OPS[_name]] = pick_vjp
