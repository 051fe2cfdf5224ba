"""sin and cos as straight-line IR (no libm calls, so fused loops vectorise), for float32
and float64; float32 is evaluated in float64 and rounded once.

Range reduction (Payne-Hanek, in floating point). x * 2/pi = n + f with n an integer and
|f| <= 1/2 gives x = n*pi/2 + r, r = f*pi/2, |r| <= pi/4. Write x = M * 2^(e-52) (M a 53-bit
integer). A bit b_i * 2^-i of 2/pi contributes M * b_i * 2^(e-52-i) to x * 2/pi, a multiple
of 4 (which changes neither sin nor cos) when i <= e - 54. So x may be multiplied by just the
bits of 2/pi from i0 = max(e - 53, 1) on, cut into 53-bit pieces C0 + C1 + C2 (+ C3 for
float64), read from a table with one row per exponent. Each product x*Ck is formed exactly
as a pair of doubles (hi = x*Ck, lo = fma(x, Ck, -hi)); x*C0 < 2^55 is reduced mod 4
exactly; n is taken from the leading terms and the rest summed keeping every rounding
error (float64), so f (and r) keep ~100 bits even when x is within 2^-60 of a multiple of
pi/2 and x is 1e300; float32 (whose nearest approach to k*pi/2 is far larger) sums the
small terms plainly. The same path serves every x (a branch per element would not
vectorise; both arms of a select are always computed). Rows far down the table would hold
subnormal pieces: for exponents above 454 the pieces are stored times 2^600 and x is
scaled by 2^-600 (exactly) before the products.

Kernels on r = rh + rl (|r| <= pi/4), with z = rh^2 and Taylor coefficients (exact
rationals, truncated where the next term is below 2^-56 relative; lower degree for
float32's 2^-30):
  sin r = rh + (rh*z*PS(z) + rl*(1 - z/2))
  cos r = w + (((1 - w) - z/2) + (z^2*PC(z) - rh*rl)),  w = 1 - z/2   (fdlibm's split)
and the quadrant n mod 4 picks +-sin r or +-cos r. sin of |x| < 2^-26 is x itself;
inf and nan give nan."""
import math
from fractions import Fraction

from llvmlite import ir

from .scalar import F32, F64, I64, Scalar

_ROWS = {"float64": 970, "float32": 74}     # exponents up to 1023 / 127: row e - 54
_PIECES = {"float64": 4, "float32": 3}      # 53-bit pieces of 2/pi per row
_SCALED_ROW = 400                            # rows from here on hold pieces * 2^600
_SCALE = 600


def _pi_bits(nbits):
    """floor(pi * 2^nbits) by Machin's formula in integer arithmetic (exact to < 8 units)."""
    guard = 32
    one = 1 << (nbits + guard)

    def atan_inv(k):
        total = term = one // k
        n, k2, sign = 1, k * k, -1
        while term:
            term //= k2
            n += 2
            total += sign * (term // n)
            sign = -sign
        return total

    return (16 * atan_inv(5) - 4 * atan_inv(239)) >> guard


def _two_over_pi_table(rows, npieces):
    """Per row j (i0 = j + 1): npieces 53-bit pieces of 2/pi's bits from i0 on."""
    nbits = rows + npieces * 53 + 64
    pi = _pi_bits(nbits + 8)
    two_over_pi = (1 << (2 * nbits + 9)) // pi          # (2/pi) * 2^nbits, truncated
    mask = (1 << 53) - 1
    out = []
    for j in range(rows):
        i0 = j + 1
        scale = _SCALE if j >= _SCALED_ROW else 0
        for k in range(npieces):
            last = i0 + 53 * k + 52                        # weight 2^-last of the piece's LSB
            piece = (two_over_pi >> (nbits - last)) & mask
            out.append(math.ldexp(float(piece), scale - last))
    return out


def _taylor(odd, count):
    """Taylor coefficients, highest power first: odd -> (sin r - r)/r^3 in z = r^2,
    else (cos r - 1 + r^2/2)/r^4."""
    first = 3 if odd else 4
    cs = [Fraction((-1) ** ((p - 1) // 2 if odd else p // 2), math.factorial(p))
          for p in range(first, first + 2 * count, 2)]
    return [float(c) for c in reversed(cs)]


_DEG = {"float64": (_taylor(True, 8), _taylor(False, 7)),
        "float32": (_taylor(True, 5), _taylor(False, 4))}
_PIO2_HI = math.pi / 2
_PIO2_LO = float(Fraction(_pi_bits(200), 1 << 201) - Fraction(_PIO2_HI))


def _table(module, dt):
    name = f"llgrad.two_over_pi_{dt}"
    gv = module.globals.get(name)
    if gv is None:
        vals = _TABLES.get(dt)
        if vals is None:
            vals = _TABLES[dt] = _two_over_pi_table(_ROWS[dt], _PIECES[dt])
        at = ir.ArrayType(F64, len(vals))
        gv = ir.GlobalVariable(module, at, name=name)
        gv.initializer = ir.Constant(at, [ir.Constant(F64, v) for v in vals])
        gv.global_constant = True
        gv.linkage = "private"
        gv.align = 64
    return gv


_TABLES = {}


class _Trig:
    """The reduction and kernels on float64 values of one builder."""

    def __init__(self, sg, dt):
        self.sg, self.b, self.dt = sg, sg.b, dt

    def c(self, v):
        return ir.Constant(F64, float(v))

    def fma(self, a, b, c):
        # llvm.fma, not fmuladd: the exact products below need a real fused multiply-add
        # (an instruction on x86-64 with FMA and on AArch64; elsewhere a libm call)
        return self.sg.call("llvm.fma", F64, a, b, c)

    def two_prod(self, a, b):
        hi = self.b.fmul(a, b)
        return hi, self.fma(a, b, self.b.fneg(hi))

    def two_sum(self, a, b):
        bb = self.b
        s = bb.fadd(a, b)
        v = bb.fsub(s, a)
        err = bb.fadd(bb.fsub(a, bb.fsub(s, v)), bb.fsub(b, v))
        return s, err

    def rint(self, x):
        return self.sg.call("llvm.roundeven", F64, x)

    def horner(self, x, coeffs):
        acc = self.c(coeffs[0])
        for co in coeffs[1:]:
            acc = self.sg.fma(acc, x, self.c(co))
        return acc

    def reduce(self, x):
        """(q, rh, rl): x = (4k + q) * pi/2 + rh + rl, q in 0..3 (an i64), for finite x."""
        b = self.b
        bits = b.bitcast(x, I64)
        e = b.sub(b.and_(b.lshr(bits, ir.Constant(I64, 52)), ir.Constant(I64, 0x7FF)),
                  ir.Constant(I64, 1023))
        rows = _ROWS[self.dt]
        j = b.sub(e, ir.Constant(I64, 54))
        j = b.select(b.icmp_signed("<", j, ir.Constant(I64, 0)), ir.Constant(I64, 0), j)
        j = b.select(b.icmp_signed(">", j, ir.Constant(I64, rows - 1)),
                     ir.Constant(I64, rows - 1), j)
        if rows > _SCALED_ROW:
            big = b.icmp_signed(">=", j, ir.Constant(I64, _SCALED_ROW))
            x = b.select(big, b.fmul(x, self.c(2.0 ** -_SCALE)), x)
        table = _table(self.sg.module, self.dt)
        npieces = _PIECES[self.dt]
        base = b.mul(j, ir.Constant(I64, npieces))
        pieces = []
        for k in range(npieces):
            p = b.gep(table, [ir.Constant(I64, 0), b.add(base, ir.Constant(I64, k))],
                      inbounds=True, source_etype=table.value_type)
            pieces.append(b.load(p, typ=F64))
        p0h, p0l = self.two_prod(x, pieces[0])
        p0h = b.fsub(p0h, b.fmul(self.rint(b.fmul(p0h, self.c(0.25))), self.c(4.0)))  # exact
        p1h, p1l = self.two_prod(x, pieces[1])
        # the integer part (n1 + n2) and the big fraction a, exactly
        a, lo1 = self.two_sum(p0h, p0l)
        n1 = self.rint(a)
        a = b.fsub(a, n1)                                        # exact, |a| <= 1/2
        a, lo2 = self.two_sum(a, p1h)
        n2 = self.rint(a)
        a = b.fsub(a, n2)
        if npieces == 3:
            # float32: ~100 bits of f are plenty
            low = b.fadd(b.fadd(lo1, lo2), b.fadd(p1l, b.fmul(x, pieces[2])))
            fh, fl = self.two_sum(a, low)       # (a may be the smaller: x near k*pi/2)
        else:
            # float64: the terms below 2^-50 summed with their errors kept, so f keeps
            # ~100 bits relative even when a and m cancel (x within 2^-60 of k*pi/2)
            p2h, p2l = self.two_prod(x, pieces[2])
            m, e1 = self.two_sum(lo1, lo2)
            m, e2 = self.two_sum(m, p1l)
            m, e3 = self.two_sum(m, p2h)
            small = b.fadd(b.fadd(b.fadd(e1, e2), b.fadd(e3, p2l)), b.fmul(x, pieces[3]))
            fh, t = self.two_sum(a, m)
            fh, fl = self.two_sum(fh, b.fadd(t, small))
        q = b.and_(b.fptosi(b.fadd(n1, n2), I64), ir.Constant(I64, 3))
        # r = f * pi/2 in double-double
        rh, rl = self.two_prod(fh, self.c(_PIO2_HI))
        rl = b.fadd(rl, self.fma(fh, self.c(_PIO2_LO), b.fmul(fl, self.c(_PIO2_HI))))
        return q, rh, rl

    def kernels(self, rh, rl):
        b = self.b
        ps, pc = _DEG[self.dt]
        z = b.fmul(rh, rh)
        hz = b.fmul(z, self.c(0.5))
        s_tail = self.fma(b.fmul(rh, z), self.horner(z, ps),
                          b.fmul(rl, b.fsub(self.c(1.0), hz)))
        s = b.fadd(rh, s_tail)
        w = b.fsub(self.c(1.0), hz)
        c_tail = b.fsub(b.fmul(b.fmul(z, z), self.horner(z, pc)), b.fmul(rh, rl))
        cs = b.fadd(w, b.fadd(b.fsub(b.fsub(self.c(1.0), w), hz), c_tail))
        return s, cs

    def eval(self, x, cos):
        b = self.b
        ax = self.sg.call("llvm.fabs", F64, x)
        finite = b.fcmp_ordered("<", ax, self.c(math.inf))
        xs = b.select(finite, x, self.c(0.0))                  # no nan/inf in the integer path
        q, rh, rl = self.reduce(xs)
        s, cs = self.kernels(rh, rl)
        if cos:
            q = b.add(q, ir.Constant(I64, 1))
        use_cos = b.icmp_unsigned("!=", b.and_(q, ir.Constant(I64, 1)), ir.Constant(I64, 0))
        negate = b.icmp_unsigned("!=", b.and_(q, ir.Constant(I64, 2)), ir.Constant(I64, 0))
        r = b.select(use_cos, cs, s)
        r = b.select(negate, b.fneg(r), r)
        if not cos:
            r = b.select(b.fcmp_ordered("<", ax, self.c(2.0 ** -26)), x, r)
        return b.select(finite, r, self.c(math.nan))


def _emit(sg, x, cos):
    single = x.dt == "float32"
    v = sg.b.fpext(x.v, F64) if single else x.v
    r = _Trig(sg, x.dt).eval(v, cos)
    return Scalar(sg.b.fptrunc(r, F32) if single else r, x.dt)


def sin(sg, x):
    return _emit(sg, x, cos=False)


def cos(sg, x):
    return _emit(sg, x, cos=True)
