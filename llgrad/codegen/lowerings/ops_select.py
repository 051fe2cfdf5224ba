"""Lowerings of relu and of the clamps, elementwise extremes, selection and interpolation
(ir/ops_select.py): clamp (and its one-sided forms), maximum, minimum, addcmul, addcdiv,
lerp, where."""
from .ops_elementwise import _no_bool
from .scalar import is_float
from .table import elementwise


# np.maximum / np.minimum to the sign of zero (a tie gives the second operand); relu and the
# clamps put x second, so that x is kept at a tie (relu(-0) = -0, as PyTorch)

@elementwise("relu", check=_no_bool)
def _relu(sg, node, a):
    return sg.np_maximum(sg.const(0, a.dt), a)


@elementwise("maximum", check=_no_bool)
def _maximum(sg, node, a, b):
    return sg.np_maximum(a, b)


@elementwise("minimum", check=_no_bool)
def _minimum(sg, node, a, b):
    return sg.np_minimum(a, b)


@elementwise("clamp_min", check=_no_bool)
def _clamp_min(sg, node, x, lo):
    return sg.np_maximum(lo, x)


@elementwise("clamp_max", check=_no_bool)
def _clamp_max(sg, node, x, hi):
    return sg.np_minimum(hi, x)


@elementwise("clamp", check=_no_bool)
def _clamp(sg, node, x, lo, hi):
    if lo is not None:
        x = sg.np_maximum(lo, x)
    if hi is not None:
        x = sg.np_minimum(hi, x)
    return x


@elementwise("addcmul", "addcdiv")
def _addc(sg, node, a, t1, t2):
    value = node.attrs.get("value", 1)          # (value * t1 first, as the reference)
    t1 = t1 if value == 1 else sg.mul(t1, sg.const(value, t1.dt))
    if node.op == "addcmul":
        return sg.fused(t1, t2, a) if is_float(a.dt) else sg.add(a, sg.mul(t1, t2))
    return sg.add(a, sg.div(t1, t2))


@elementwise("lerp")
def _lerp(sg, node, a, b, w):
    d = sg.sub(b, a)                    # from the nearer end (ir.ops_select._lerp)
    if is_float(a.dt):
        near_a = sg.fused(w, d, a)
        near_b = sg.fused(sg.neg(d), sg.sub(sg.const(1, w.dt), w), b)
    else:
        near_a = sg.add(a, sg.mul(w, d))
        near_b = sg.sub(b, sg.mul(d, sg.sub(sg.const(1, w.dt), w)))
    return sg.select(sg.truth(sg.cmp("<", sg.abs(w), sg.const(0.5, w.dt))), near_a, near_b)


@elementwise("where")
def _where(sg, node, c, a, b):
    return sg.select(sg.truth(c), a, b)
