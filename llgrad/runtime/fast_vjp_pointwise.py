"""NumPy VJPs of relu, sigmoid, masked_fill and mse_loss for the common eager backward of
small tensors (fast_vjp_views._plain: float32/float64 operands, no create_graph, tracer, vmap,
forward AD, profiler or autocast), as fast_vjp_small's tanh_vjp: their rules dispatch two or
three ops each (relu: result <= 0, then masked_fill; sigmoid: g * result, 1 - result, their
product; mse_loss: self - target, g * that, times the scale), which on a hidden layer or a
regression head of a few hundred elements cost several times the arithmetic. relu and
sigmoid are eager_native ops, whose one-loop native VJP takes only large tensors
(OpNode.apply asks here when it declines). Here the rules' ops run on their implementations,
in the rules' order, with their operands and attributes, on C-contiguous arrays of one shape
(or a 0-d gradient: each result then has the layout the dispatcher would give it; none of
these ops has a native eager kernel), so the values are the rules' bit for bit; anything
else returns None and the rule runs."""
from ..ir import ops_data_movement, ops_elementwise, ops_nn  # noqa: F401  (the ops declared)
from ..ir.optable import OPS
from .dtypes import bool_
from .fast_vjp_small import _FLOATS, _softmax_operands
from .fast_vjp_views import _plain
from .node import fast_vjps
from .tensor import Tensor

_new = Tensor._from_array
_LE, _MASKED_FILL, _MUL, _RSUB = OPS["le"], OPS["masked_fill"], OPS["mul"], OPS["rsub"]
_SUB, _NEG = OPS["sub"], OPS["neg"]


def relu_vjp(node, g):
    """ops_elementwise's relu rule with grad mode off (zero_linked leaves its gradient as it
    is): (g.masked_fill(result <= 0, 0),), or None."""
    ops = _softmax_operands(node, g, None) if _plain(g) else None
    if ops is None:
        return None
    a, r, _ = ops
    try:
        return (_new(_MASKED_FILL.impl(a, _LE.impl(r, 0), 0)),)
    except Exception:       # noqa: BLE001 (a warning made an error: the rule's)
        return None


def sigmoid_vjp(node, g):
    """ops_elementwise's sigmoid rule on real tensors: (g * result * (1 - result),), its
    products in its order, or None."""
    ops = _softmax_operands(node, g, None) if _plain(g) else None
    if ops is None:
        return None
    a, r, _ = ops
    try:
        return (_new(_MUL.impl(_MUL.impl(a, r), _RSUB.impl(r, 1, alpha=1))),)
    except Exception:       # noqa: BLE001 (a warning made an error: the rule's)
        return None


def masked_fill_vjp(node, g):
    """ops_data_movement's masked_fill rule where only the filled tensor wants a gradient:
    (g.masked_fill(mask, 0), None, None) for a bool mask of g's shape, or None."""
    if not _plain(g) or not node.needs(0) or node.needs(2):
        return None
    a = g._data
    if a.dtype not in _FLOATS or not a.ndim or not a.flags.c_contiguous:
        return None
    mask = node.mask        # (unpacked: the rule's version check)
    if type(mask) is not Tensor or mask._dtype is not bool_ or mask._data.shape != a.shape \
            or not mask._data.flags.c_contiguous:
        return None
    try:
        return _new(_MASKED_FILL.impl(a, mask._data, 0)), None, None
    except Exception:       # noqa: BLE001 (a warning made an error: the rule's)
        return None


def mse_loss_vjp(node, g):
    """ops_nn._mse_vjp: d = self - target, gd = g * d * scale, (gd, -gd) as wanted, for a
    target of self's dtype and shape and a 0-d gradient (mean, sum) or one of self's shape,
    all C-contiguous; or None."""
    if not _plain(g):
        return None
    a = g._data
    if a.ndim and not a.flags.c_contiguous:
        return None
    x, t = node.self, node.target       # (unpacked in the rule's order: its version checks)
    for v in (x, t):
        if type(v) is not Tensor or v._dtype is not g._dtype or v._data.shape != x._data.shape \
                or not v._data.flags.c_contiguous:
            return None
    n = 1
    for k in node.shape(0):     # (the rule's count: the input's shape at the forward)
        n *= k
    if not n or a.shape not in ((), x._data.shape):
        return None
    scale = 2.0 / n if node.reduction == "mean" else 2.0
    try:
        gd = _MUL.impl(_MUL.impl(a, _SUB.impl(x._data, t._data, alpha=1)), scale)
        return (_new(gd) if node.needs(0) else None,
                _new(_NEG.impl(gd)) if node.needs(1) else None)
    except Exception:       # noqa: BLE001 (a warning made an error: the rule's)
        return None


# (each runs its ops' NumPy implementations as the dispatcher would: no native kernels, no
# promotion between the operands used here, a layout kept from C-contiguous operands)
for _op in (_LE, _MASKED_FILL, _MUL, _RSUB, _SUB, _NEG):
    assert not (_op.eager_native or _op.eager_rows or _op.eager_steps or _op.eager_kernel) \
        and _op.kind == "elementwise" and _op.autocast is None
fast_vjps[OPS["relu"]] = relu_vjp
fast_vjps[OPS["sigmoid"]] = sigmoid_vjp
fast_vjps[_MASKED_FILL] = masked_fill_vjp
fast_vjps[OPS["mse_loss"]] = mse_loss_vjp
