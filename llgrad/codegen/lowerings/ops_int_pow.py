"""pow of integer operands, one element: square-and-multiply over every bit of the exponent,
wrapping in the dtype as PyTorch's integral pow does (products modulo 2**bits do not depend
on their order, so the wrapped values are PyTorch's and NumPy's); a negative exponent gives
1 and -1 to it as 1 and +-1 and anything else 0, as ir/ops_pow.py (PyTorch's powi)."""
from llvmlite import ir

from .scalar import Scalar, is_unsigned


def int_pow(sg, x, e):
    """x ** e of integer Scalars (e a Scalar or a Python int) in x's dtype."""
    b, t = sg.b, x.v.type
    e = sg.cast(e, x.dt) if isinstance(e, Scalar) else sg.const(e, x.dt)
    one = ir.Constant(t, 1)
    r, sq = one, x.v
    for i in range(t.width):        # (all bits: an odd base's powers wrap with period 2**62)
        bit = b.trunc(b.lshr(e.v, ir.Constant(t, i)), ir.IntType(1))
        r = b.select(bit, b.mul(r, sq), r)
        if i + 1 < t.width:
            sq = b.mul(sq, sq)
    if is_unsigned(x.dt):
        return Scalar(r, x.dt)
    minus_one, zero = ir.Constant(t, -1), ir.Constant(t, 0)
    odd = b.trunc(e.v, ir.IntType(1))
    below = b.select(b.icmp_signed("==", x.v, one), one,
                     b.select(b.icmp_signed("==", x.v, minus_one),
                              b.select(odd, minus_one, one), zero))
    return Scalar(b.select(b.icmp_signed("<", e.v, zero), below, r), x.dt)
