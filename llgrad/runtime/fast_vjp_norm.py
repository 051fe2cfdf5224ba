"""NumPy-side VJP of layer_norm for the common eager backward below the size of its shaped
kernel (compile/eager_shaped_vjp.py takes 1024 elements and more, and runs this one where it
declines): float32/float64 operands, no create_graph, tracer, vmap, forward AD, profiler or
autocast (fast_vjp_views._plain). The rule (ops_nn._norm_vjp) is 15 to 18 dispatched ops
over rows; on a small transformer's (6, 4, 16) activations their dispatch, not their arithmetic,
was most of the backward (150 us; 70 here). Here the rule's ops run on the implementations the
dispatcher would call (run_impl's: the native eager kernel first where the op has one) on
the arrays, in the rule's order, with its operands and attributes: C-contiguous operands of
one float dtype, so nothing is promoted and every result keeps NumPy's C-contiguous layout,
as the dispatcher's layout step would; the values are the rule's bit for bit. Anything else
returns None and the rule runs."""
import numpy as np

from ..ir import ops_elementwise, ops_nn, ops_reduce  # noqa: F401  (the ops declared)
from ..ir.optable import OPS
from . import dispatch
from .fast_vjp_views import _plain
from .meta_tensor import is_meta
from .node import fast_vjps
from .tensor import Tensor

_MEAN, _SUB, _MUL, _ADD, _RSQRT, _SUM = (
    OPS[n] for n in ("mean", "sub", "mul", "add", "rsqrt", "sum"))
_ONE = {"alpha": 1}
_NONE = {}
_new = Tensor._from_array


class _Declined(Exception):
    pass


def _operand(t, dtype):
    return isinstance(t, Tensor) and t._dtype is dtype and not is_meta(t) and \
        t._data.flags.c_contiguous


def _run(op, arrays, attrs):
    """dispatch.run_impl's result on C-contiguous arrays of one float dtype (promotion has
    nothing to do; the native eager kernel first where the op has one), which the
    dispatcher's layout step keeps as it is when it is C-contiguous too."""
    if (op.eager_native or op.eager_rows or op.eager_steps or op.eager_kernel) and \
            dispatch.native_eager is not None:
        out = dispatch.native_eager(op, arrays, attrs)
        if out is None:
            out = op.impl(*arrays, **attrs)
    else:
        out = op.impl(*arrays, **attrs)
    if not out.flags.c_contiguous:
        raise _Declined
    return out


def layer_norm_vjp(node, g):
    """ops_nn._layer_norm_vjp on real float32/float64 C-contiguous operands: (grad of self,
    of weight, of bias) as _norm_vjp computes them, each only where wanted, or None."""
    if not _plain(g) or not g._data.flags.c_contiguous:
        return None
    x, w = node.self, node.weight       # (unpacked in the rule's order: its version checks)
    k, eps, dt = node.normalized_ndim, node.eps, g._dtype
    if not _operand(x, dt) or x._data.shape != g._data.shape or \
            w is not None and not _operand(w, dt) or type(eps) is not float or \
            type(k) is not int:
        return None
    xa, ga, wa = x._data, g._data, None if w is None else w._data
    ndim = xa.ndim
    stats = {"dim": tuple(range(ndim - k, ndim)), "keepdim": True}
    reduce_dims = tuple(range(ndim - k))
    summed = {"dim": reduce_dims, "keepdim": False}
    need_x, need_w, need_b = node.needs(0), node.needs(1), node.needs(2)
    gx = gw = gb = None
    try:
        with np.errstate(all="ignore"):     # (the dispatcher's runs are silent too)
            xc = _run(_SUB, (xa, _run(_MEAN, (xa,), stats)), _ONE)
            var = _run(_MEAN, (_run(_MUL, (xc, xc), _NONE),), stats)
            rstd = _run(_RSQRT, (_run(_ADD, (var, eps), _ONE),), _NONE)
            xhat = _run(_MUL, (xc, rstd), _NONE)
            if need_x:
                gxhat = _run(_MUL, (ga, wa), _NONE) if wa is not None else ga
                centred = _run(_SUB, (gxhat, _run(_MEAN, (gxhat,), stats)), _ONE)
                proj = _run(_MEAN, (_run(_MUL, (gxhat, xhat), _NONE),), stats)
                gx = _new(_run(_MUL, (rstd, _run(_SUB, (
                    centred, _run(_MUL, (xhat, proj), _NONE)), _ONE)), _NONE))
            if need_w:
                gw = _run(_MUL, (ga, xhat), _NONE)
                gw = _new(_run(_SUM, (gw,), summed) if reduce_dims else gw)
            if need_b:
                gb = _new(_run(_SUM, (ga,), summed)) if reduce_dims else g
    except Exception:       # noqa: BLE001 (_Declined, a bad shape: the rule's error)
        return None
    return gx, gw, gb


fast_vjps[OPS["layer_norm"]] = layer_norm_vjp
