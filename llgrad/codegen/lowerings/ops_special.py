"""Lowerings of ir/ops_special.py (asin ... polygamma: vecmath_special.py's straight-line
IR; xlogy, xlog1py and entr as selects around vecmath's log; polygamma of order 2 and more as Cephes' zeta's loop) and of
ir/ops_bitwise.py (bitwise and/or/xor/not and the shifts as single instructions with
PyTorch's out-of-range rule; gcd and lcm as Euclid's loop, in C's arithmetic as PyTorch's
kernels and the reference; integer floor / trunc division as C's, without its traps)."""
from llvmlite import ir

from . import vecmath, vecmath_special as vs
from .fusion import compute_dtypes
from .scalar import I64, Scalar, is_float, is_unsigned
from .table import elementwise


def _floats_only(node):
    if any(d is not None and not is_float(d) for d in compute_dtypes(node)):
        return "integer operands"
    return None


def _ints_only(node):
    if any(d is not None and is_float(d) for d in compute_dtypes(node)):
        return "float operands"
    return None


for _name in ("asin", "acos", "atan", "erfc", "erfinv", "lgamma", "digamma"):
    elementwise(_name, check=_floats_only)(
        (lambda f: lambda sg, node, x: f(sg, x))(vs.unary(_name)))


@elementwise("atan2", check=_floats_only)
def _atan2(sg, node, y, x):
    return vs.atan2(sg, y, x)


@elementwise("fmod_float", check=_floats_only)
def _fmod_float(sg, node, a, b):
    return Scalar(sg.b.frem(a.v, b.v), a.dt)        # (LLVM's frem is C's fmod)


@elementwise("remainder_float", check=_floats_only)
def _remainder_float(sg, node, a, b):
    mod = Scalar(sg.b.frem(a.v, b.v), a.dt)
    zero = sg.const(0, a.dt)
    fix = sg.b.and_(sg.cmp("!=", mod, zero).v,
                    sg.b.xor(sg.cmp("<", b, zero).v, sg.cmp("<", mod, zero).v))
    return sg.select(fix, sg.add(mod, b), mod)


def _xlog(log, fill):
    """xlogy / xlog1py: +0 where x is 0 and y is not nan, else x * log(y) (log of `fill`
    there, so that no inf or nan is made only to be dropped)."""
    def lower(sg, node, x, y):
        zero = sg.const(0, x.dt)
        at0 = sg.b.and_(sg.cmp("==", x, zero).v, sg.cmp("==", y, y).v)
        return sg.select(at0, zero, sg.mul(x, log(sg, sg.select(at0, sg.const(fill, y.dt), y))))
    return lower


elementwise("xlogy_float", check=_floats_only)(_xlog(vecmath.log, 1))
elementwise("xlog1py_float", check=_floats_only)(_xlog(vecmath.log1p, 0))


@elementwise("entr", check=_floats_only)
def _entr(sg, node, x):
    zero = sg.const(0, x.dt)
    pos = sg.cmp(">", x, zero).v
    inner = sg.neg(sg.mul(x, vecmath.log(sg, sg.select(pos, x, sg.const(1, x.dt)))))
    rest = sg.select(sg.cmp("==", x, zero).v, zero, sg.const(float("-inf"), x.dt))
    return sg.select(sg.isnan(x), x, sg.select(pos, inner, rest))


def _polygamma_check(node):
    n = node.attrs.get("n")
    if not isinstance(n, int) or n < 0:
        return f"polygamma of order {n!r}"
    return _floats_only(node)


@elementwise("polygamma", "polygamma_", check=_polygamma_check)
def _polygamma(sg, node, x):
    return vs.polygamma(sg, x, node.attrs["n"])


# ---- bitwise ----------------------------------------------------------------------------------

for _name, _f in (("bitwise_and", "and_"), ("bitwise_or", "or_"), ("bitwise_xor", "xor")):
    elementwise(_name, check=_ints_only)(
        (lambda f: lambda sg, node, a, b: Scalar(getattr(sg.b, f)(a.v, b.v), a.dt))(_f))


@elementwise("bitwise_not", check=_ints_only)
def _bitwise_not(sg, node, a):
    return Scalar(sg.b.not_(a.v), a.dt)


def _shift(sg, a, b, left):
    """a shifted by b, 0 (left) or the sign (right) outside [0, width), as PyTorch."""
    bld, t = sg.b, a.v.type
    zero = ir.Constant(t, 0)
    ok = bld.icmp_unsigned("<", b.v, ir.Constant(t, t.width))     # (negative: huge, unsigned)
    s = bld.select(ok, b.v, zero)
    if left:
        return Scalar(bld.select(ok, bld.shl(a.v, s), zero), a.dt)
    if is_unsigned(a.dt):
        return Scalar(bld.select(ok, bld.lshr(a.v, s), zero), a.dt)
    sign = bld.ashr(a.v, ir.Constant(t, t.width - 1))
    return Scalar(bld.select(ok, bld.ashr(a.v, s), sign), a.dt)


def _no_bool(node):
    if "bool" in compute_dtypes(node):
        return "bool operands"
    return _ints_only(node)


elementwise("bitwise_left_shift", check=_no_bool)(
    lambda sg, node, a, b: _shift(sg, a, b, True))
elementwise("bitwise_right_shift", check=_no_bool)(
    lambda sg, node, a, b: _shift(sg, a, b, False))


def _wide(sg, v, dt, t):
    """v (of dtype dt) as the type t: sign- or zero-extended, C's promotion."""
    if v.type.width == t.width:
        return v
    return sg.b.zext(v, t) if is_unsigned(dt) else sg.b.sext(v, t)


def _gcd64(sg, a, b):
    """PyTorch's calc_gcd: |a|, |b| in their dtype (abs of the minimum stays it), then
    while a != 0: a, b = b % a, a, in 64 bits (C's remainder)."""
    bld = sg.b
    a0 = _wide(sg, sg.abs(a).v, a.dt, I64)
    b0 = _wide(sg, sg.abs(b).v, b.dt, I64)
    pre = bld.block
    head = bld.append_basic_block("gcd.head")
    body = bld.append_basic_block("gcd.body")
    done = bld.append_basic_block("gcd.done")
    bld.branch(head)
    bld.position_at_end(head)
    pa, pb = bld.phi(I64), bld.phi(I64)
    pa.add_incoming(a0, pre)
    pb.add_incoming(b0, pre)
    bld.cbranch(bld.icmp_signed("!=", pa, ir.Constant(I64, 0)), body, done)
    bld.position_at_end(body)
    pa.add_incoming(bld.srem(pb, pa), body)
    pb.add_incoming(pa, body)
    bld.branch(head)
    bld.position_at_end(done)
    return pb


@elementwise("gcd", check=_no_bool)
def _gcd(sg, node, a, b):
    return Scalar(sg.b.trunc(_gcd64(sg, a, b), a.v.type) if a.v.type.width < 64 else
                  _gcd64(sg, a, b), a.dt)


@elementwise("lcm", check=_no_bool)
def _lcm(sg, node, a, b):
    """|a / g * b| (0 where g == 0) in C's int for the narrower dtypes, wrapping."""
    bld, t = sg.b, a.v.type
    wt = ir.IntType(max(32, t.width))
    g = bld.trunc(_gcd64(sg, a, b), wt) if wt.width < 64 else _gcd64(sg, a, b)
    av, bv = _wide(sg, a.v, a.dt, wt), _wide(sg, b.v, b.dt, wt)
    zero, one = ir.Constant(wt, 0), ir.Constant(wt, 1)
    is0 = bld.icmp_signed("==", g, zero)
    minus1 = bld.icmp_signed("==", g, ir.Constant(wt, -1))
    safe = bld.select(bld.or_(is0, minus1), one, g)           # (no division by 0, no MIN/-1)
    q = bld.select(minus1, bld.neg(av), bld.sdiv(av, safe))
    p = bld.mul(q, bv)
    ap = bld.select(bld.icmp_signed("<", p, zero), bld.neg(p), p)
    r = bld.select(is0, zero, ap)
    return Scalar(bld.trunc(r, t) if wt.width > t.width else r, a.dt)


def _ints_no_bool(node):
    return _ints_only(node) or ("bool operands" if "bool" in compute_dtypes(node) else None)


@elementwise("div_int", check=_ints_no_bool)
def _div_int(sg, node, a, b):
    """C's a / b, rounded down for "floor" where the remainder's sign is not b's; a divisor
    of 0 reads as 1 (the runtime raises first) and of -1 negates (no trap at the minimum)."""
    bld, t = sg.b, a.v.type
    zero, one = ir.Constant(t, 0), ir.Constant(t, 1)
    safe = bld.select(bld.icmp_signed("==", b.v, zero), one, b.v)
    if is_unsigned(a.dt):
        q = bld.udiv(a.v, safe)
        return Scalar(q, a.dt)
    minus1 = bld.icmp_signed("==", safe, ir.Constant(t, -1))
    safe = bld.select(minus1, one, safe)
    q = bld.select(minus1, bld.neg(a.v), bld.sdiv(a.v, safe))
    if node.attrs.get("rounding_mode", "floor") == "floor":
        r = bld.select(minus1, zero, bld.srem(a.v, safe))
        fix = bld.and_(bld.icmp_signed("!=", r, zero),
                       bld.xor(bld.icmp_signed("<", r, zero), bld.icmp_signed("<", b.v, zero)))
        q = bld.select(fix, bld.sub(q, one), q)
    return Scalar(q, a.dt)
