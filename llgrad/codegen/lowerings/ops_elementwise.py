"""Lowerings of the elementwise ops: one element of the result from one element of each
operand, mirroring each op's NumPy implementation in llgrad/ir (same operation order, same
NaN/inf behaviour; transcendental functions from vecmath). The clamps, extremes, where
and lerp are ops_select.py's; the copies and fills ops_copy.py's."""
import math

from llvmlite import ir

from . import vecmath
from .fusion import compute_dtypes
from .ops_fill_more import _libm
from .ops_int_pow import int_pow
from .scalar import Scalar, is_float
from .table import elementwise


def _dts(node):
    return [d for d in compute_dtypes(node) if d is not None]


def _no_bool(node):
    if "bool" in _dts(node):
        return "bool operands"
    return None


def _alpha_ok(node):
    alpha = node.attrs.get("alpha", 1)
    dts = _dts(node)
    if any(not is_float(d) for d in dts) and (alpha != 1 and
                                              (isinstance(alpha, float) or "bool" in dts)):
        return f"alpha={alpha!r} on integer operands"
    if node.op != "add" and "bool" in dts:
        return "bool operands"
    return None


def _floats_only(node):
    if any(not is_float(d) for d in _dts(node)):
        return "integer operands"
    return None


def _scaled(sg, x, alpha):
    return x if alpha == 1 else sg.mul(x, sg.const(alpha, x.dt))


def _plus_scaled(sg, a, b, alpha, sub=False):
    """a + alpha * b (a - alpha * b with sub): one fused multiply-add for floats, as
    ir.fused_madd.fused_alpha."""
    if alpha == 1 or isinstance(alpha, bool) or not is_float(a.dt):
        return (sg.sub if sub else sg.add)(a, _scaled(sg, b, alpha))
    return sg.fused(b, sg.const(-alpha if sub else alpha, b.dt), a)


# ---- arithmetic ----------------------------------------------------------------------------

@elementwise("add", check=_alpha_ok)
def _add(sg, node, a, b):
    return _plus_scaled(sg, a, b, node.attrs.get("alpha", 1))


@elementwise("sub", check=_alpha_ok)
def _sub(sg, node, a, b):
    return _plus_scaled(sg, a, b, node.attrs.get("alpha", 1), sub=True)


@elementwise("rsub", check=_alpha_ok)
def _rsub(sg, node, a, b):
    return _plus_scaled(sg, b, a, node.attrs.get("alpha", 1), sub=True)


@elementwise("mul")
def _mul(sg, node, a, b):
    return sg.mul(a, b)


@elementwise("div", check=_floats_only)
def _div(sg, node, a, b):
    return sg.div(a, b)


def _floor_divide(sg, a, b, q):
    """np.floor_divide (npy_divmod; PyTorch's div_floor_floating, Python's //): the quotient
    of a - fmod(a, b), which is a multiple of b, snapped to an integer; a / b where b == 0."""
    bld, c = sg.b, (lambda v: sg.const(v, a.dt))                    # noqa: E731
    mod = Scalar(bld.frem(a.v, b.v), a.dt)                          # (C's fmod)
    div = sg.div(sg.sub(a, mod), b)
    fix = bld.and_(sg.cmp("!=", mod, c(0)).v,
                   bld.xor(sg.cmp("<", b, c(0)).v, sg.cmp("<", mod, c(0)).v))
    div = sg.select(fix, sg.sub(div, c(1)), div)
    fl = Scalar(sg.call("llvm.floor", div.v.type, div.v), a.dt)
    fl = sg.select(sg.cmp(">", sg.sub(div, fl), c(0.5)).v, sg.add(fl, c(1)), fl)
    zero = Scalar(sg.call("llvm.copysign", q.v.type, c(0).v, q.v), a.dt)
    r = sg.select(sg.cmp("!=", div, c(0)).v, fl, zero)             # (NaN: != holds)
    return sg.select(sg.cmp("==", b, c(0)).v, q, r)


@elementwise("div_mode", check=_floats_only)
def _div_mode(sg, node, a, b):
    q = sg.div(a, b)
    mode = node.attrs.get("rounding_mode")
    if mode == "floor":
        return _floor_divide(sg, a, b, q)
    if mode == "trunc":
        return Scalar(sg.call("llvm.trunc", q.v.type, q.v), q.dt)
    return q


@elementwise("div_scalar", check=_floats_only)
def _div_scalar(sg, node, a, b):
    return sg.div(a, b)


@elementwise("neg", check=_no_bool)
def _neg(sg, node, a):
    return sg.neg(a)


@elementwise("abs", check=_no_bool)
def _abs(sg, node, a):
    return sg.abs(a)


@elementwise("reciprocal", check=_floats_only)
def _reciprocal(sg, node, a):
    return sg.div(sg.const(1, a.dt), a)


@elementwise("sign", check=_no_bool)
def _sign(sg, node, a):
    pos = sg.cmp(">", a, sg.const(0, a.dt)).v
    neg = sg.cmp("<", a, sg.const(0, a.dt)).v
    # (0 at NaN, as PyTorch, and at -0: np.sign(-0.0) is +0, as torch.sign)
    zero = sg.const(0, a.dt)
    return sg.select(pos, sg.const(1, a.dt), sg.select(neg, sg.const(-1, a.dt), zero))


# ---- unary math ---------------------------------------------------------------------------

def _unary(name, fn):
    # (libm=True: a Python number's math.exp, glibc's as math's: runtime/symbolic_math.py)
    elementwise(name, check=_floats_only)(lambda sg, node, a: _libm(sg, name, a) if (
        node.attrs.get("libm") and a.dt == "float64") else fn(sg, a))


_unary("exp", vecmath.exp)
_unary("expm1", vecmath.expm1)
_unary("log", vecmath.log)
_unary("tanh", vecmath.tanh)
_unary("sigmoid", vecmath.sigmoid)
_unary("log1p", vecmath.log1p)
_unary("erf", vecmath.erf)
_unary("sin", vecmath.sin)
_unary("sqrt", lambda sg, a: Scalar(sg.call("llvm.sqrt", a.v.type, a.v), a.dt))
_unary("rsqrt", lambda sg, a: sg.div(sg.const(1, a.dt),
                                      Scalar(sg.call("llvm.sqrt", a.v.type, a.v), a.dt)))
_unary("silu", lambda sg, a: sg.mul(a, vecmath.sigmoid(sg, a)))


@elementwise("cos", check=_floats_only)
def _cos(sg, node, a):
    # (libm=True: a Python number's cos, glibc's as math.cos's: runtime/symbolic_math.py)
    if node.attrs.get("libm") and a.dt == "float64":
        return _libm(sg, "cos", a)
    return vecmath.cos(sg, a)


@elementwise("floor", check=_floats_only)
def _floor(sg, node, a):
    return Scalar(sg.call("llvm.floor", a.v.type, a.v), a.dt)


@elementwise("round", check=lambda n: None if not n.attrs.get("decimals") else "decimals")
def _round(sg, node, a):
    if not is_float(a.dt):
        return a
    return Scalar(sg.call("llvm.roundeven", a.v.type, a.v), a.dt)   # half to even


def _gelu_check(node):
    if node.attrs.get("approximate", "none") not in ("tanh", "none"):
        return f"gelu approximate={node.attrs.get('approximate')!r}"
    return _floats_only(node)


@elementwise("gelu", check=_gelu_check)
def _gelu(sg, node, x):
    # 0.5 * x * (1 + tanh(c * (x + 0.044715 * x * x * x))), in the reference's order;
    # exact: 0.5 * x * (1 + erf(x / sqrt(2)))
    c = lambda v: sg.const(v, x.dt)                                # noqa: E731
    if node.attrs.get("approximate", "none") == "none":
        e = vecmath.erf(sg, sg.div(x, c(math.sqrt(2.0))))
        return sg.mul(sg.mul(c(0.5), x), sg.add(c(1), e))
    cube = sg.mul(sg.mul(sg.mul(c(0.044715), x), x), x)
    inner = sg.mul(c(math.sqrt(2.0 / math.pi)), sg.add(x, cube))
    return sg.mul(sg.mul(c(0.5), x), sg.add(c(1), vecmath.tanh(sg, inner)))


@elementwise("leaky_relu", "leaky_relu_", check=_floats_only)
def _leaky_relu(sg, node, x):
    slope = node.attrs.get("negative_slope", 0.01)
    pos = sg.cmp(">", x, sg.const(0, x.dt)).v
    return sg.select(pos, x, sg.mul(x, sg.const(slope, x.dt)))


# ---- selection by a mask ----------------------------------------------------------------------

@elementwise("masked_fill")
def _masked_fill(sg, node, x, mask, value):
    v = sg.cast(value, x.dt) if isinstance(value, Scalar) else sg.const(value, x.dt)
    return sg.select(sg.truth(mask), v, x)


# ---- comparisons and logic -------------------------------------------------------------------

for _name, _op in (("eq", "=="), ("ne", "!="), ("lt", "<"), ("le", "<="), ("gt", ">"),
                   ("ge", ">=")):
    elementwise(_name)((lambda op: lambda sg, node, a, b: sg.cmp(op, a, b))(_op))


@elementwise("logical_not")
def _logical_not(sg, node, a):
    return Scalar(sg.b.not_(sg.truth(a)), "bool")


for _name, _f in (("logical_and", "and_"), ("logical_or", "or_"), ("logical_xor", "xor")):
    elementwise(_name)((lambda f: lambda sg, node, a, b:
                        Scalar(getattr(sg.b, f)(sg.truth(a), sg.truth(b)), "bool"))(_f))


@elementwise("isnan")
def _isnan(sg, node, a):
    if not is_float(a.dt):
        return sg.const(False, "bool")
    return Scalar(sg.isnan(a), "bool")


@elementwise("isfinite")
def _isfinite(sg, node, a):
    if not is_float(a.dt):
        return sg.const(True, "bool")
    fab = sg.call("llvm.fabs", a.v.type, a.v)
    return Scalar(sg.b.fcmp_ordered("<", fab, ir.Constant(a.v.type, math.inf)), "bool")


# ---- pow ------------------------------------------------------------------------------------

def _pow_check(node):
    # (integer operands are multiplies, wrapping as PyTorch's: ops_int_pow.py)
    if any(d == "bool" or d.startswith("complex") for d in _dts(node)):
        return "integer pow"
    return None


@elementwise("pow", check=_pow_check)
def _pow(sg, node, x, e):
    """PyTorch's pow: a Python-number exponent in {0, 1, 2, 3, 0.5, -0.5, -1, -2} is inlined
    as multiplies / sqrt / a division (vectorisable; the eager implementation's values,
    which are PyTorch's); anything else calls libm's pow/powf through llvm.pow (NumPy's own
    loop)."""
    ev = node.inputs[1]
    c = lambda v: sg.const(v, x.dt)                                 # noqa: E731
    if not is_float(x.dt) and not (type(ev) is int and 0 <= ev <= 3):
        return int_pow(sg, x, e)
    if isinstance(ev, (int, float)) and not isinstance(ev, bool):
        if ev == 0:
            return c(1)                                             # pow(nan, 0) == 1
        if ev == 1:
            return x
        if ev == 2:
            return sg.mul(x, x)
        if ev == 3:
            return sg.mul(sg.mul(x, x), x)
        if ev == -1:
            return sg.div(c(1), x)
        if ev == -2:
            return sg.div(c(1), sg.mul(x, x))
        if ev == 0.5:
            # NumPy's power has the same fast path (sqrt(-0) = -0, sqrt(-inf) = nan)
            return Scalar(sg.call("llvm.sqrt", x.v.type, x.v), x.dt)
        if ev == -0.5 and x.dt != "float16":       # (PyTorch's rsqrt; float16's is pow's)
            return sg.div(c(1), Scalar(sg.call("llvm.sqrt", x.v.type, x.v), x.dt))
    if not isinstance(e, Scalar):
        e = sg.const(ev, x.dt)
    return Scalar(sg.call("llvm.pow", x.v.type, x.v, e.v), x.dt)


def _softplus_check(node):
    beta, thr = node.attrs.get("beta", 1), node.attrs.get("threshold", 20)
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (beta, thr)):
        return "non-number beta/threshold"
    return _floats_only(node)


@elementwise("softplus", check=_softplus_check)
def _softplus(sg, node, x):
    """where(x*beta > threshold, x, logaddexp(0, x*beta) / beta), logaddexp as NumPy's:
    max(0, y) + log1p(exp(-|y|)) (y = 0 gives log 2; NaN propagates through the sum)."""
    beta, thr = node.attrs.get("beta", 1), node.attrs.get("threshold", 20)
    c = lambda v: sg.const(v, x.dt)                                # noqa: E731
    y = x if beta == 1 else sg.mul(x, c(beta))
    big = sg.cmp(">", y, c(thr)).v
    lae = sg.add(sg.maximum(y, c(0)),
                 vecmath.log1p(sg, vecmath.exp(sg, sg.neg(sg.abs(y)))))
    r = lae if beta == 1 else sg.div(lae, c(beta))
    return sg.select(big, x, r)
