"""NumPy VJPs of nll_loss, log_softmax and softmax (a classifier's cross_entropy, attention's
weights), of tanh, and of the views t (every Linear's weight) and reshape (view_vjp) for the
common eager backward: float32/float64 operands, no create_graph, tracer, vmap or forward
AD. Their rules are tensor ops over small arrays (nll_loss's: a comparison, where, the
weights, the scale, masked_fill, a scatter into zeros; ~15 dispatches, ~150 us where
PyTorch's whole cross_entropy backward takes 30 on a small classifier's batch; tanh's three,
~12 us above its NumPy passes on a (128, 64) layer). Here the same op implementations run on
the arrays (none of these ops has a native eager kernel), in the rules' order and with their
operands and attributes (the dispatcher's dtype promotion done the same way; C-contiguous
operands, so that each intermediate has the layout the dispatcher would give it), and the
rules' pure selections as the NumPy selections they are, so the values are the rules' bit
for bit; anything else returns None and the rule runs. These ops' shaped kernels
(compile/eager_shaped_vjp.py) run first where they serve; these VJPs serve below their sizes
and while a kernel builds."""
import numpy as np

from ..ir import ops_nn, ops_reduce  # noqa: F401  (the ops declared)
from ..ir.optable import OPS
from . import dispatch, grad_mode, trace_state
from .meta_tensor import is_meta
from .node import fast_vjps
from .tensor import Tensor

_grad = grad_mode.state
_tstate = trace_state.state
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_INT64 = np.dtype(np.int64)
_new = Tensor._from_array
_MUL, _NEG, _DIV, _SUM, _SELECT, _EXP, _SUB, _RSUB = (
    OPS[n] for n in ("mul", "neg", "div", "sum", "index_select", "exp", "sub", "rsub"))


def _plain(g):
    return not _grad.grad_enabled and _tstate.tracer is None and dispatch.batching is None \
        and dispatch.forward_ad is None and type(g) is Tensor and not is_meta(g)


def _float(t, dtype):
    return type(t) is Tensor and t._dtype is dtype and t._data.dtype in _FLOATS and \
        not is_meta(t)


def nll_loss_vjp(node, g):
    """ops_nn._nll_vjp's (grad of input, None, None) of an (N, C) input and int64 (N,)
    targets, or None (the rule runs)."""
    if not _plain(g):
        return None
    x, t, w = node.self, node.target, node.weight   # (unpacked: the rule's version checks)
    ii, dt = node.ignore_index, g._dtype
    if not _float(x, dt) or x._data.ndim != 2 or type(t) is not Tensor or \
            t._data.dtype != _INT64 or t._data.shape != x._data.shape[:1] or \
            type(ii) is not int or not -1 << 63 <= ii < 1 << 63 or \
            w is not None and not _float(w, dt):
        return None
    reduction = node.reduction
    ga, ta = g._data, t._data
    if ga.shape != (() if reduction in ("mean", "sum") else ta.shape):
        return None
    n, c = x._data.shape
    try:
        # the rule's arithmetic on the implementations the dispatcher would call (none
        # promotes here but the product by keep, a bool operand cast to x's dtype as the
        # dispatcher casts it); its selections (ne, where, masked_fill and the scatter of
        # one value per row into zeros) as the NumPy selections they are: the same bits
        # without ~10 us of each op's checks
        keep = ta != ii
        safe = np.where(keep, ta, 0)
        if n and (np.minimum.reduce(safe) < 0 or np.maximum.reduce(safe) >= c):
            return None             # (an index out of range: the rule's error)
        keep_f = keep.astype(dt.np)
        # (without a weight the rule's product keep_f * keep_f: each 0 * 0 or 1 * 1, keep_f)
        wt = keep_f if w is None else _MUL.impl(_SELECT.impl(w._data, safe, dim=0), keep_f)
        scale = _NEG.impl(ga)
        if reduction == "mean":
            scale = _DIV.impl(scale, _SUM.impl(wt, dim=None, keepdim=False))
        src = np.where(keep, _MUL.impl(wt, scale), np.zeros((), dt.np))
        gx = np.zeros((n, c), dt.np)
        # (one index per row: each element gets 0 + its value once, as scatter_add's add)
        gx[np.arange(n), safe] += src
    except Exception:       # noqa: BLE001 (a warning made an error: the rule's)
        return None
    return (_new(gx), None, None)


def _softmax_operands(node, g, dim=0):
    """(g, result, the summed dims as the rule's sum gets them: node.dim's; None for dim=None),
    or None."""
    if not _plain(g):
        return None
    r = node.result
    a = g._data
    if not _float(r, g._dtype) or r._data.shape != a.shape or not a.ndim or \
            not a.flags.c_contiguous or not r._data.flags.c_contiguous:
        return None
    if dim is None:
        return a, r._data, None
    dim = node.dim
    if type(dim) is not int or not -a.ndim <= dim < a.ndim:
        return None
    return a, r._data, (dim % a.ndim,)


def log_softmax_vjp(node, g):
    """g - exp(result) * g.sum(dim, keepdim=True) (the rule), or None."""
    ops = _softmax_operands(node, g)
    if ops is None:
        return None
    a, r, dims = ops
    try:
        s = _SUM.impl(a, dim=dims, keepdim=True)
        return (_new(_SUB.impl(a, _MUL.impl(_EXP.impl(r), s), alpha=1)),)
    except Exception:       # noqa: BLE001 (a warning made an error: the rule's)
        return None


def softmax_vjp(node, g):
    """result * (g - (g * result).sum(dim, keepdim=True)) (the rule), or None."""
    ops = _softmax_operands(node, g)
    if ops is None:
        return None
    a, r, dims = ops
    try:
        s = _SUM.impl(_MUL.impl(a, r), dim=dims, keepdim=True)
        return (_new(_MUL.impl(r, _SUB.impl(a, s, alpha=1))),)
    except Exception:       # noqa: BLE001 (a warning made an error: the rule's)
        return None


def tanh_vjp(node, g):
    """g * (1 - result * result) (the rule: its mul, rsub and mul on the arrays; conj of a
    real tensor is itself) of a C-contiguous float gradient and result, or None."""
    ops = _softmax_operands(node, g, None)
    if ops is None:
        return None
    a, r, _ = ops
    try:
        return (_new(_MUL.impl(a, _RSUB.impl(_MUL.impl(r, r), 1, alpha=1))),)
    except Exception:       # noqa: BLE001 (a warning made an error: the rule's)
        return None


def t_vjp(node, g):
    """g.t() (the rule), as the dispatcher makes that view (of g, made with grad mode off),
    or None."""
    a = g._data if type(g) is Tensor else None
    if a is None or a.ndim > 2 or not _plain(g):
        return None
    return (Tensor._view_of(a.T, g),)


fast_vjps[OPS["nll_loss"]] = nll_loss_vjp
fast_vjps[OPS["log_softmax"]] = log_softmax_vjp
fast_vjps[OPS["softmax"]] = softmax_vjp
fast_vjps[OPS["tanh"]] = tanh_vjp
fast_vjps[OPS["t"]] = t_vjp


_VIEW = OPS["view"]


def view_vjp(node, g):
    """g.reshape(input's shape) (the rule of view, _reshape_alias and _unsafe_view) of a
    C-contiguous gradient: the view op that reshape dispatches there, its result made as the
    dispatcher makes a view's (a view of g), or None (the rule runs)."""
    a = g._data if type(g) is Tensor else None
    if a is None or not a.flags.c_contiguous or not a.size or not _plain(g) or \
            dispatch.stand_ins.active:
        return None
    return (Tensor._view_of(_VIEW.impl(a, shape=node.shape(0)), g),)


for _name in ("view", "_reshape_alias", "_unsafe_view"):
    fast_vjps[OPS[_name]] = view_vjp
