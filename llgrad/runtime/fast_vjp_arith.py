"""NumPy VJPs of mul (MulBackward0) and sub (SubBackward0) for the common eager backward: no
create_graph, tracer, vmap, forward AD or profiler, float32/float64 gradients. mul's rule is
(g * conj(other), g * conj(self)): for a real tensor or a Python number conj is the operand
itself, so each product is the dispatcher's call of mul on (g, operand) and its result layout
(dispatch.run_impl, then _rows / iterator_layout as dispatch.call lays it out): the same
implementation on the same operands, the same bits, without the operator, method and
dispatcher layers around them (~2 us of a small tensor's ~5 us backward node). sub's rule
with alpha 1 is (g, -g): the neg op's call the same way. Operands are unpacked (their version
checks) only where the rule would read them, in its order, and only once they are known to be
served here (an unpack hook runs once, as the rule runs it); anything else returns None
before any unpacking and the rule runs."""
from ..ir.optable import OPS
from . import dispatch, grad_mode, trace_state
from .dispatch import _rows
from .dtypes import float32, float64
from .memory_layout import iterator_layout
from .meta_tensor import is_meta
from .node import fast_vjps
from .saved_tensor import SavedNumber, SavedTensor
from .tensor import Tensor

_grad = grad_mode.state
_tstate = trace_state.state
_new = Tensor._from_array
_MUL, _NEG, _SUB = OPS["mul"], OPS["neg"], OPS["sub"]
_FLOATS = (float32, float64)
_INT_RANGE = 1 << 53        # (a Python int operand: well inside the dispatcher's plain ints)


def _plain(g):
    return not _grad.grad_enabled and _tstate.tracer is None and dispatch.batching is None \
        and dispatch.forward_ad is None and dispatch.profiler is None and \
        type(g) is Tensor and g._dtype in _FLOATS and not is_meta(g)


def _served(node, key, dt):
    """Whether the operand saved under key is one this VJP takes, read without unpacking:
    a tensor of the gradient's dtype saved as itself (no pack hook, not an output), or a
    Python float or int."""
    v = node._saved.get(key)
    if type(v) is SavedTensor:
        t = v.tensor
        cls = type(t)
        # (a subclass of its own may take the product itself: its __rmul__ runs first)
        return (cls is Tensor or isinstance(t, Tensor) and cls.__rmul__ is Tensor.__rmul__
                and cls.conj is Tensor.conj) and t._dtype is dt and not is_meta(t)
    if type(v) is SavedNumber:
        v = v.value
    return type(v) is float or type(v) is int and -_INT_RANGE < v < _INT_RANGE


def _call(op, ins):
    """op on ins as the dispatcher computes it (dispatch.call's steps for mul and neg, grad
    mode off)."""
    out = dispatch.run_impl(op, ins, {})
    return _new(out if _rows(ins, out) else iterator_layout(out, ins, op))


def mul_vjp(node, g):
    """ops_elementwise's mul rule: (g * conj(other), g * conj(self)), or None."""
    if not _plain(g):
        return None
    dt = g._dtype
    need_a, need_b = node.needs(0), node.needs(1)
    if need_a and not _served(node, "other", dt) or need_b and not _served(node, "self", dt):
        return None
    ga = _call(_MUL, (g, node.other)) if need_a else None    # (the rule's order: other first)
    gb = _call(_MUL, (g, node.self)) if need_b else None
    return ga, gb


def sub_vjp(node, g):
    """ops_elementwise's sub rule with alpha 1: (g, -g), or None."""
    alpha = node.attrs.get("alpha")         # (c.alpha: sub saves nothing)
    if not _plain(g) or type(alpha) not in (int, float) or alpha != 1:
        return None
    return g, _call(_NEG, (g,))


# (mul and neg run on NumPy's implementations with their results laid out by
# iterator_layout: an op whose results the dispatcher makes contiguous or views would need
# dispatch.call's other branches here)
for _op in (_MUL, _NEG):
    _info = dispatch._infos.get(_op) or dispatch._info(_op)
    assert not _info.view and not _info.contig and _info.layout and _info.single and \
        not _op.eager_native and _op.autocast is None
fast_vjps[_MUL] = mul_vjp
fast_vjps[_SUB] = sub_vjp
