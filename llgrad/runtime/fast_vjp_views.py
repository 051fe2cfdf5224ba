"""NumPy VJPs of bmm, of the views squeeze, unsqueeze and transpose, of cat, and of embedding
for the common eager backward (no create_graph, tracer, vmap, forward AD or autocast; float32
or float64 Tensors of one dtype): a small recurrent model's backward is mostly these (a GRU
seq2seq's attention: per decoder step two bmm, two squeeze/unsqueeze pairs, two cat and an
embedding), and each rule's dispatch of its transposes, views, splits and zeros cost as much
as its arithmetic. Each makes the NumPy calls its rule makes through the dispatcher (bmm: the
same matmul of the gradient and the transposed operand, made C-ordered as the dispatcher
makes bmm's results; the views: the same views of the gradient; embedding: the index_put of
the gradient into zeros, on run_impl as the dispatcher runs it), so the values, layouts and
aliasing are the rule's; anything else returns None and the rule runs (OpNode.apply)."""
import numpy as np

from ..ir import ops_data_movement, ops_nn, ops_shape  # noqa: F401  (the ops declared)
from ..ir.np_matmul import matmul
from ..ir.optable import OPS, c_order
from . import dispatch, grad_mode, trace_state
from .autocast_cast import state as autocast_state
from .fast_vjp_small import view_vjp
from .meta_tensor import is_meta
from .node import fast_vjps
from .tensor import Tensor

_grad = grad_mode.state
_tstate = trace_state.state
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_new, _view_of = Tensor._from_array, Tensor._view_of
_TRANSPOSE, _SPLIT, _INDEX_PUT = OPS["transpose"], OPS["split"], OPS["index_put"]
_ACCUMULATE = {"spec": ("T",), "accumulate": True}


def _plain(g):
    """Whether g is a float32/float64 gradient of the plain eager backward."""
    return not _grad.grad_enabled and _tstate.tracer is None and dispatch.batching is None \
        and dispatch.forward_ad is None and dispatch.profiler is None and \
        autocast_state.dtype is None and not dispatch.stand_ins.active and \
        type(g) is Tensor and g._data.dtype in _FLOATS and not is_meta(g)


def bmm_vjp(node, g):
    """ops_nn._bmm_vjp (real operands): (g @ mat2^T, self^T @ g), or None. Each operand is
    unpacked (version-checked) only where the other's gradient is wanted, as the rule does."""
    if not _plain(g) or g._data.ndim != 3:
        return None
    need_a, need_b = node.needs(0), node.needs(1)
    b = node.mat2 if need_a else None
    a = node.self if need_b else None
    dt = g._dtype
    for x in (a, b):
        if x is not None and (type(x) is not Tensor or x._dtype is not dt or is_meta(x)):
            return None
    ga = _new(c_order(matmul(g._data, b._data.swapaxes(-1, -2)))) if need_a else None
    gb = _new(c_order(matmul(a._data.swapaxes(-1, -2), g._data))) if need_b else None
    return ga, gb


def transpose_vjp(node, g):
    """g.transpose(dim0, dim1) (the rule): the view the dispatcher makes of g, or None."""
    if not _plain(g) or not g._data.ndim:
        return None
    nd = g._data.ndim
    d0, d1 = node.attrs["dim0"], node.attrs["dim1"]
    if not (-nd <= d0 < nd and -nd <= d1 < nd):
        return None
    return (_view_of(_TRANSPOSE.impl(g._data, dim0=d0 % nd, dim1=d1 % nd), g),)


def cat_vjp(node, g):
    """g.split([each input's size along dim], dim) (the rule): the views of g the dispatcher
    makes, or None (an input of another rank, PyTorch's legacy empty 1-D operand, included)."""
    if not _plain(g) or not g._data.ndim:
        return None
    nd = g._data.ndim
    dim = node.attrs["dim"]
    if type(dim) is not int or not -nd <= dim < nd:
        return None
    dim %= nd
    sizes = []
    for shape, _ in node._in_meta:
        if len(shape) != nd:
            return None
        sizes.append(shape[dim])
    if sum(sizes) != g._data.shape[dim]:
        return None
    return tuple(_view_of(o, g) for o in _SPLIT.impl(g._data, sizes=tuple(sizes), dim=dim))


def embedding_vjp(node, g):
    """zeros(weight's shape).index_put_((indices,), g, accumulate=True) (the rule without
    padding_idx or scale_grad_by_freq) on the index_put implementation the dispatcher runs,
    or None."""
    attrs = node.attrs
    if not _plain(g) or attrs.get("padding_idx") is not None or \
            attrs.get("scale_grad_by_freq"):
        return None
    idx = node.indices
    shape, dt = node._in_meta[0]
    if type(idx) is not Tensor or dt is not g._dtype or is_meta(idx) or \
            not idx._dtype._plain:
        return None
    zeros = _new(np.zeros(shape, g._data.dtype))
    return (_new(dispatch.run_impl(_INDEX_PUT, [zeros, g, idx], _ACCUMULATE)), None)


fast_vjps[OPS["bmm"]] = bmm_vjp
fast_vjps[OPS["transpose"]] = transpose_vjp
fast_vjps[OPS["cat"]] = cat_vjp
fast_vjps[OPS["embedding"]] = embedding_vjp
# (their rules are g.reshape(input's shape), as view's)
fast_vjps[OPS["squeeze"]] = view_vjp
fast_vjps[OPS["unsqueeze"]] = view_vjp
