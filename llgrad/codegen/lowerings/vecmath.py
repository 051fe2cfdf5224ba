"""Vector math as straight-line IR: exp, expm1, log, tanh, sigmoid, log1p, erf, sin, cos for
float32/float64 (sin and cos live in vecmath_trig.py: their range reduction has a table and
double-double arithmetic of its own; they are re-exported here).

No calls (llvm.exp is a libm call that blocks vectorisation): range reduction with integer
bit tricks, polynomials evaluated with llvm.fmuladd, special values (inf, nan, overflow,
underflow into subnormals) handled with selects. Accuracy: a few ulps of the dtype over
the whole range (tests/codegen checks it against NumPy).

exp(x) = 2^n * (1 + expm1(r)), n = round(x / ln2), r = x - n*ln2 (Cody-Waite split of ln2),
|r| <= ln2/2, expm1(r) by its Taylor polynomial (degree 8 for float32, 13 for float64); the
2^n scale is applied in two halves so results in the subnormal range round once.
log(x) = k*ln2 + log1p(f), x = 2^k * (1 + f), 1 + f in [sqrt(1/2), sqrt(2)), with
log1p(f) = f - f^2/2 + s*(f^2/2 + R(s^2)), s = f / (2 + f) (fdlibm's decomposition; R is the
series of 2*atanh(s) - 2s, truncated where it falls below the dtype's precision).
tanh(x) = sign(x) * e / (e + 2) with e = expm1(2|x|) for |x| >= 0.55; below, x + x^3 S(x^2)/Q(x^2)
from Lambert's continued fraction tanh x = x / (1 + x^2 / (3 + x^2 / (5 + ...))) truncated
(exact rational coefficients; depth 4 for float32, 7 for float64).
sigmoid(x) = (x >= 0 ? 1 : z) / (1 + z), z = exp(-|x|) (the reference's formula: z = 0 where
PyTorch's exp(-x) overflows)."""
import math
import struct
from decimal import Decimal, localcontext
from fractions import Fraction

from llvmlite import ir

from ...ir.erf_table import (ERF32_NATIVE_FAR, ERF32_NATIVE_NEAR, ERF32_NATIVE_ONE,
                              ERF32_NATIVE_SPLIT, ERF_CENTRES, ERF_DEGREE, erf_coefficients)
from ...ir.sigmoid_np import ZERO_AT as SIGMOID_ZERO_AT
from .scalar import F32, F64, I32, I64, Scalar
from .vecmath_trig import cos, sin  # noqa: F401  (re-exported)


def _tanh_fraction(depth):
    """Lambert's continued fraction for tanh(x)/x truncated at 2*depth+1, as
    1 + u*S(u)/Q(u) with u = x^2: (S, Q) coefficient lists, highest power first."""
    num, den = [Fraction(2 * depth + 1)], [Fraction(1)]          # T = num/den, in u
    for k in range(depth - 1, -1, -1):                            # T_k = (2k+1) + u / T_k+1
        new = [Fraction(0)] * max(len(num), len(den) + 1)
        for i, c in enumerate(num):
            new[i] += (2 * k + 1) * c
        for i, c in enumerate(den):
            new[i + 1] += c
        num, den = new, num
    p, q = den, num                                                # tanh(x)/x = p/q
    diff = [(p[i] if i < len(p) else 0) - (q[i] if i < len(q) else 0)
            for i in range(max(len(p), len(q)))]
    assert diff[0] == 0
    return [float(c) for c in reversed(diff[1:])], [float(c) for c in reversed(q)]


def _f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def _ln2_split(single):
    """ln2 = hi + lo with hi short enough that n*hi is exact for the n that occur."""
    with localcontext() as ctx:
        ctx.prec = 60
        ln2 = Decimal(2).ln()
    if single:
        bits = struct.unpack("<I", struct.pack("<f", float(ln2)))[0] & ~((1 << 12) - 1)
        hi = struct.unpack("<f", struct.pack("<I", bits))[0]
        return hi, _f32(float(ln2 - Decimal(hi)))
    bits = struct.unpack("<Q", struct.pack("<d", float(ln2)))[0] & ~((1 << 20) - 1)
    hi = struct.unpack("<d", struct.pack("<Q", bits))[0]
    return hi, float(ln2 - Decimal(hi))


class _K:
    """Per-dtype constants."""

    def __init__(self, single):
        self.t = F32 if single else F64
        self.it = I32 if single else I64
        self.mant = 23 if single else 52
        self.bias = 127 if single else 1023
        self.shifter = 1.5 * 2.0 ** self.mant          # x + shifter rounds x to an integer
        self.shifter_bits = struct.unpack("<I", struct.pack("<f", self.shifter))[0] if single \
            else struct.unpack("<Q", struct.pack("<d", self.shifter))[0]
        self.ln2hi, self.ln2lo = _ln2_split(single)
        self.log2e = 1.0 / math.log(2.0)
        self.exp_hi = 89.0 if single else 710.0       # exp overflows to inf above
        self.exp_lo = -104.0 if single else -746.0     # exp underflows to 0 below
        self.sigmoid_zero_at = SIGMOID_ZERO_AT["float32" if single else "float64"]
        self.expm1_lo = -30.0 if single else -60.0     # expm1 == -1 below
        self.expm1_big = 24 if single else 53          # n above which expm1 = exp - 1
        deg = 8 if single else 13
        # expm1(r) = r + r^2 * q(r), q(r) = sum_{k=2..deg} r^(k-2)/k!  (highest first)
        self.q = [float(Fraction(1, math.factorial(k))) for k in range(deg, 1, -1)]
        nterms = 5 if single else 10
        # R(z) = sum_{k=1..nterms} 2 z^k / (2k+1) = z * Rp(z)  (highest first)
        self.rp = [2.0 / (2 * k + 1) for k in range(nterms, 0, -1)]
        self.min_normal = 2.0 ** -126 if single else 2.0 ** -1022
        self.sub_scale = 2.0 ** 25 if single else 2.0 ** 54
        self.sub_shift = 25 if single else 54
        self.tanh_clamp = 20.0 if single else 44.0     # tanh(x/2) rounds to 1 above
        self.tanh_s, self.tanh_q = _tanh_fraction(4 if single else 7)


_KS = {"float32": _K(True), "float64": _K(False)}


class _M:
    """Helpers on raw values of one float type."""

    def __init__(self, sg, dt):
        self.sg, self.b, self.k = sg, sg.b, _KS[dt]

    def c(self, v):
        return ir.Constant(self.k.t, float(v))

    def ci(self, v):
        return ir.Constant(self.k.it, int(v))

    def fma(self, a, b, c):
        return self.sg.fma(a, b, c)

    def horner(self, x, coeffs):
        acc = self.c(coeffs[0])
        for co in coeffs[1:]:
            acc = self.fma(acc, x, self.c(co))
        return acc

    def clamp(self, x, lo, hi):
        """Clamp keeping NaN (ordered compares are false on NaN)."""
        b = self.b
        x = b.select(b.fcmp_ordered(">", x, self.c(hi)), self.c(hi), x)
        return b.select(b.fcmp_ordered("<", x, self.c(lo)), self.c(lo), x)

    def pow2(self, n):
        """2^n for integer n in the normal exponent range (bit construction)."""
        b, k = self.b, self.k
        e = b.shl(b.add(n, self.ci(k.bias)), self.ci(k.mant))
        return b.bitcast(e, k.t)

    def reduce(self, x):
        """(n as int, expm1(r)) with x = n*ln2 + r, for x already clamped."""
        b, k = self.b, self.k
        t = self.fma(x, self.c(k.log2e), self.c(k.shifter))
        nf = b.fsub(t, self.c(k.shifter))
        n = b.sub(b.bitcast(t, k.it), self.ci(k.shifter_bits))
        r = self.fma(b.fneg(nf), self.c(k.ln2hi), x)
        r = self.fma(b.fneg(nf), self.c(k.ln2lo), r)
        q = self.horner(r, k.q)
        p = self.fma(b.fmul(r, r), q, r)
        return n, p

    def scale(self, y, n):
        """y * 2^n in two steps (each half a normal power of two)."""
        b = self.b
        n1 = b.ashr(n, self.ci(1))
        n2 = b.sub(n, n1)
        return b.fmul(b.fmul(y, self.pow2(n1)), self.pow2(n2))

    def exp(self, x):
        # below exp_lo exp rounds to 0: computed from 0 instead, and 0 chosen, since the
        # scaling of the clamped value would make a subnormal product, which costs ~100
        # cycles of microcode per lane on x86 (a causal softmax's -inf half of the scores
        # took 4x as long as its other half)
        b, k = self.b, self.k
        under = b.fcmp_ordered("<", x, self.c(k.exp_lo))
        x = self.clamp(b.select(under, self.c(0.0), x), k.exp_lo, k.exp_hi)
        n, p = self.reduce(x)
        return b.select(under, self.c(0.0), self.scale(b.fadd(self.c(1.0), p), n))

    def expm1(self, x):
        b, k = self.b, self.k
        x = self.clamp(x, k.expm1_lo, k.exp_hi)
        n, p = self.reduce(x)
        s = self.pow2(n)                                   # valid while n <= expm1_big
        small = self.fma(s, p, b.fsub(s, self.c(1.0)))
        big = b.fsub(self.scale(b.fadd(self.c(1.0), p), n), self.c(1.0))
        r = b.select(b.icmp_signed(">", n, self.ci(k.expm1_big)), big, small)
        return b.select(b.fcmp_ordered("==", x, self.c(0.0)), x, r)     # expm1(-0) = -0

    def log(self, x):
        b, k = self.b, self.k
        sub = b.fcmp_ordered("<", x, self.c(k.min_normal))
        xs = b.select(sub, b.fmul(x, self.c(k.sub_scale)), x)
        bits = b.bitcast(xs, k.it)
        e = b.sub(b.lshr(bits, self.ci(k.mant)), self.ci(k.bias))
        e = b.sub(e, b.select(sub, self.ci(k.sub_shift), self.ci(0)))
        one_bits = self.ci(struct.unpack("<I", struct.pack("<f", 1.0))[0] if k.t == F32
                           else struct.unpack("<Q", struct.pack("<d", 1.0))[0])
        mbits = b.or_(b.and_(bits, self.ci((1 << k.mant) - 1)), one_bits)
        m = b.bitcast(mbits, k.t)                                  # in [1, 2)
        big = b.fcmp_ordered(">", m, self.c(math.sqrt(2.0)))
        m = b.select(big, b.fmul(m, self.c(0.5)), m)
        e = b.add(e, b.select(big, self.ci(1), self.ci(0)))
        f = b.fsub(m, self.c(1.0))
        s = b.fdiv(f, b.fadd(self.c(2.0), f))
        z = b.fmul(s, s)
        r = b.fmul(z, self.horner(z, k.rp))
        hfsq = b.fmul(self.c(0.5), b.fmul(f, f))
        kf = b.sitofp(e, k.t)
        # k*ln2hi - ((hfsq - (s*(hfsq+R) + k*ln2lo)) - f)
        inner = self.fma(s, b.fadd(hfsq, r), b.fmul(kf, self.c(k.ln2lo)))
        res = self.fma(kf, self.c(k.ln2hi), b.fneg(b.fsub(b.fsub(hfsq, inner), f)))
        inf = self.c(math.inf)
        res = b.select(b.fcmp_ordered("==", x, inf), inf, res)
        res = b.select(b.fcmp_ordered("==", x, self.c(0.0)), self.c(-math.inf), res)
        res = b.select(b.fcmp_unordered("<", x, self.c(0.0)), self.c(math.nan), res)
        return res                                   # (x < 0 or NaN: the unordered compare)

    def tanh(self, x):
        b, k = self.b, self.k
        ax = self.sg.call("llvm.fabs", k.t, x)
        small = b.fcmp_ordered("<", ax, self.c(0.55))
        # |x| >= 0.55: e = expm1(2|x|) with 2|x| clamped, so n <= 29 (float32) / 64 and one
        # power of two scales it: e = 2^n * expm1(r) + (2^n - 1)
        t = b.fmul(ax, self.c(2.0))
        t = b.select(b.fcmp_ordered(">", t, self.c(k.tanh_clamp)), self.c(k.tanh_clamp), t)
        n, p = self.reduce(t)
        s = self.pow2(n)
        e = self.fma(s, p, b.fsub(s, self.c(1.0)))
        # |x| < 0.55: tanh = x + x*u*S(u)/Q(u); one division serves both branches, computed
        # for |x| and given x's sign (tanh(-0) = -0)
        u = b.fmul(x, x)
        num = b.select(small, b.fmul(b.fmul(ax, u), self.horner(u, k.tanh_s)), e)
        den = b.select(small, self.horner(u, k.tanh_q), b.fadd(e, self.c(2.0)))
        q = b.fdiv(num, den)
        return self.sg.call("llvm.copysign", k.t, b.select(small, b.fadd(ax, q), q), x)

    def log1p(self, x):
        """Goldberg's trick: with w = fl(1 + x), log1p(x) = log(w) * (x / (w - 1)) (the factor
        corrects the rounding of 1 + x; a few ulps), x itself where w == 1 (tiny x, -0),
        and inf at +inf (where the quotient is inf/inf)."""
        b = self.b
        w = b.fadd(self.c(1.0), x)
        d = b.fsub(w, self.c(1.0))
        r = b.fmul(self.log(w), b.fdiv(x, d))      # (log(w) * x would overflow for huge x)
        r = b.select(b.fcmp_ordered("==", d, self.c(0.0)), x, r)
        return b.select(b.fcmp_ordered("==", x, self.c(math.inf)), x, r)

    def sigmoid(self, x):
        b, k = self.b, self.k
        ax = self.sg.call("llvm.fabs", self.k.t, x)
        # z = exp(-|x|): only the underflow clamp applies (the select keeps NaN)
        na = b.fneg(ax)
        na = b.select(b.fcmp_ordered("<", na, self.c(k.exp_lo)), self.c(k.exp_lo), na)
        n, p = self.reduce(na)
        z = self.scale(b.fadd(self.c(1.0), p), n)
        # 0 where PyTorch's 1 / (1 + exp(-x)) overflows exp (ir/sigmoid_np.py)
        z = b.select(b.fcmp_ordered("<=", x, self.c(k.sigmoid_zero_at)), self.c(0.0), z)
        num = b.select(b.fcmp_ordered(">=", x, self.c(0.0)), self.c(1.0), z)
        return b.fdiv(num, b.fadd(self.c(1.0), z))


def _unary(name):
    def fn(sg, x):
        return Scalar(getattr(_M(sg, x.dt), name)(x.v), x.dt)
    fn.__name__ = name
    return fn


exp = _unary("exp")
expm1 = _unary("expm1")
log = _unary("log")
tanh = _unary("tanh")
sigmoid = _unary("sigmoid")
log1p = _unary("log1p")


# ---- erf ------------------------------------------------------------------------------------
# The method and its coefficient table: ir/erf_table.py (eager's erf evaluates the same).


def _erf_table(module, deg):
    name = f"llgrad.erf_table{deg}"
    gv = module.globals.get(name)
    if gv is None:
        flat = [ir.Constant(F64, v) for row in erf_coefficients(deg) for v in reversed(row)]
        at = ir.ArrayType(F64, len(flat))
        gv = ir.GlobalVariable(module, at, name=name)
        gv.initializer = ir.Constant(at, flat)
        gv.global_constant = True
        gv.linkage = "private"
        gv.align = 64
    return gv


def _erf32(sg, x):
    """float32 erf in float32 arithmetic (ir/erf_table.py: the method, within 1 ulp)."""
    b = sg.b
    m = _M(sg, "float32")
    c = m.c
    v = x.v
    ax = sg.call("llvm.fabs", F32, v)
    near = m.fma(v, m.horner(b.fmul(v, v), ERF32_NATIVE_NEAR), v)           # x + x q(x^2)
    # 1 - e^p(a), a = |x| clamped to the far range (NaN: the top, replaced below); e^p is
    # exp's reduction alone: p(a) is in [-18, -1.7], no overflow, underflow or subnormal
    a = b.select(b.fcmp_ordered(">", ax, c(ERF32_NATIVE_SPLIT)), ax, c(ERF32_NATIVE_SPLIT))
    a = b.select(b.fcmp_ordered("<", a, c(ERF32_NATIVE_ONE)), a, c(ERF32_NATIVE_ONE))
    n, em1 = m.reduce(m.horner(a, ERF32_NATIVE_FAR))
    far = b.fsub(c(1.0), b.fmul(b.fadd(c(1.0), em1), m.pow2(n)))
    far = b.select(b.fcmp_ordered("<", ax, c(ERF32_NATIVE_ONE)), far, c(1.0))
    r = b.select(b.fcmp_ordered("<", ax, c(ERF32_NATIVE_SPLIT)), near,
                 sg.call("llvm.copysign", F32, far, v))
    r = b.select(b.fcmp_unordered("uno", v, v), v, r)
    return Scalar(r, x.dt)


def erf(sg, x):
    b = sg.b
    single = x.dt == "float32"
    if single:
        return _erf32(sg, x)
    deg = ERF_DEGREE[x.dt]
    v = b.fpext(x.v, F64) if single else x.v
    ax = sg.call("llvm.fabs", F64, v)
    last = ERF_CENTRES - 1
    # the centre index from a NaN-free, clamped |x| (fptosi of NaN would be poison)
    safe = b.select(b.fcmp_ordered("<", ax, ir.Constant(F64, last / 2)), ax,
                    ir.Constant(F64, last / 2))
    j = b.fptosi(sg.call("llvm.roundeven", F64, b.fmul(safe, ir.Constant(F64, 2.0))), I64)
    t = b.fsub(safe, b.fmul(b.sitofp(j, F64), ir.Constant(F64, 0.5)))
    table = _erf_table(sg.module, deg)
    base = b.mul(j, ir.Constant(I64, deg + 1))
    acc = None
    for k in range(deg + 1):
        p = b.gep(table, [ir.Constant(I64, 0), b.add(base, ir.Constant(I64, k))], inbounds=True,
                  source_etype=table.value_type)
        co = b.load(p, typ=F64)
        acc = co if acc is None else sg.fma(acc, t, co)
    r = b.select(b.fcmp_ordered(">=", ax, ir.Constant(F64, last / 2)), ir.Constant(F64, 1.0),
                 acc)
    r = sg.call("llvm.copysign", F64, r, v)
    r = b.select(b.fcmp_unordered("uno", v, v), v, r)
    return Scalar(b.fptrunc(r, F32) if single else r, x.dt)

