"""The special functions (asin, acos, atan, atan2, erfc, erfinv, lgamma, digamma, trigamma)
as straight-line IR (and polygamma of higher order as the loop of Cephes' zeta, which eager
runs too): llgrad/ir/special_kernels.py's methods, which eager runs on NumPy
arrays, run here on an arithmetic of LLVM float64 values (selects, no branches, no libm
calls: fused loops vectorise; the tables are constant globals read by gathers). float32 is
evaluated in float64 and rounded once, as eager does."""
import math

from llvmlite import ir

from ...ir import special_kernels as K
from ...ir.special_numpy import np_zeta_constants
from .scalar import F32, F64, I64, Scalar
from .vecmath import _M, erf


def _global(module, name, values):
    gname = f"llgrad.special.{name}"
    gv = module.globals.get(gname)
    if gv is None:
        at = ir.ArrayType(F64, len(values))
        gv = ir.GlobalVariable(module, at, name=gname)
        gv.initializer = ir.Constant(at, [ir.Constant(F64, float(v)) for v in values])
        gv.global_constant = True
        gv.linkage = "private"
        gv.align = 64
    return gv


class LLVMMath:
    """special_kernels' arithmetic on raw LLVM double values (masks: i1; indices: i64)."""

    def __init__(self, sg):
        self.sg, self.b = sg, sg.b
        self._m = _M(sg, "float64")

    def c(self, v):
        return ir.Constant(F64, float(v))

    def add(self, a, b):
        return self.b.fadd(a, b)

    def sub(self, a, b):
        return self.b.fsub(a, b)

    def mul(self, a, b):
        return self.b.fmul(a, b)

    def div(self, a, b):
        return self.b.fdiv(a, b)

    def neg(self, a):
        return self.b.fneg(a)

    def abs(self, a):
        return self.sg.call("llvm.fabs", F64, a)

    def sqrt(self, a):
        return self.sg.call("llvm.sqrt", F64, a)

    def fma(self, a, b, c):
        return self.sg.fma(a, b, c)

    def two_prod(self, a, b):
        hi = self.b.fmul(a, b)
        return hi, self.sg.call("llvm.fma", F64, a, b, self.b.fneg(hi))

    def _cmp(op):
        return lambda self, a, b: self.b.fcmp_ordered(op, a, b)

    lt, le, gt, ge, eq = _cmp("<"), _cmp("<="), _cmp(">"), _cmp(">="), _cmp("==")
    del _cmp

    def and_(self, a, b):
        return self.b.and_(a, b)

    def or_(self, a, b):
        return self.b.or_(a, b)

    def not_(self, a):
        return self.b.not_(a)

    def select(self, mask, a, b):
        return self.b.select(mask, a, b)

    def isnan(self, a):
        return self.b.fcmp_unordered("uno", a, a)

    def copysign(self, a, b):
        return self.sg.call("llvm.copysign", F64, a, b)

    def signbit(self, a):
        return self.b.icmp_signed("<", self.b.bitcast(a, I64), ir.Constant(I64, 0))

    def rint(self, a):
        return self.sg.call("llvm.roundeven", F64, a)

    def floor(self, a):
        return self.sg.call("llvm.floor", F64, a)

    def exp(self, a):
        return self._m.exp(a)

    def log(self, a):
        return self._m.log(a)

    def log1p(self, a):
        return self._m.log1p(a)

    def erf(self, a):
        return erf(self.sg, Scalar(a, "float64")).v

    def horner(self, x, coeffs):
        return self._m.horner(x, coeffs)

    def _clamp_index(self, j, n):
        b = self.b
        j = b.select(b.icmp_signed("<", j, ir.Constant(I64, 0)), ir.Constant(I64, 0), j)
        return b.select(b.icmp_signed(">", j, ir.Constant(I64, n - 1)),
                        ir.Constant(I64, n - 1), j)

    def index_bits(self, x, lo_exp, sub, n):
        b = self.b
        j = b.ashr(b.bitcast(x, I64), ir.Constant(I64, 52 - sub))
        return self._clamp_index(b.sub(j, ir.Constant(I64, (1023 + lo_exp) << sub)), n)

    def index_float(self, v, offset, n):
        b = self.b
        # NaN and negatives to 0, then at most n - 1, so that fptosi never sees NaN or inf
        v = b.select(b.fcmp_ordered(">=", v, self.c(0.0)), v, self.c(0.0))
        v = b.select(b.fcmp_ordered("<", v, self.c(n - 1)), v, self.c(n - 1))
        j = b.fptosi(self.floor(v), I64)
        return b.add(j, ir.Constant(I64, offset)) if offset else j

    def _load(self, gv, k):
        b = self.b
        p = b.gep(gv, [ir.Constant(I64, 0), k], inbounds=True, source_etype=gv.value_type)
        return b.load(p, typ=F64)

    def gather(self, name, values, j):
        return self._load(_global(self.sg.module, name, values), j)

    def table(self, name, rows, j, t):
        width = len(rows[0])
        gv = _global(self.sg.module, name, [v for row in rows for v in reversed(row)])
        base = self.b.mul(j, ir.Constant(I64, width))
        acc = None
        for k in range(width):
            co = self._load(gv, self.b.add(base, ir.Constant(I64, k)))
            acc = co if acc is None else self.sg.fma(acc, t, co)
        return acc


def _in_double(sg, kernel, *xs):
    single = xs[0].dt == "float32"
    vals = [sg.b.fpext(x.v, F64) if single else x.v for x in xs]
    r = kernel(LLVMMath(sg), *vals)
    return Scalar(sg.b.fptrunc(r, F32) if single else r, xs[0].dt)


def unary(name):
    """The emitter of special_kernels.<name> for one float element."""
    kernel = K.KERNELS[name]

    def fn(sg, x):
        return _in_double(sg, kernel, x)
    fn.__name__ = name
    return fn


def atan2(sg, y, x):
    return _in_double(sg, K.atan2, y, x)



def _zeta(sg, x, q):
    """zeta(x, q) for a constant x > 1 and a double q: special_numpy.np_zeta's method (Cephes'),
    step for step, as a loop (the direct sum until q + k > 9, at least 9 terms, with its early
    exit) and the unrolled Euler-Maclaurin tail (an exit after each term); inf at the poles."""
    b = sg.b
    c = LLVMMath(sg).c
    powx = c(-x)
    machep = np_zeta_constants()[1]
    # the poles (-inf included) answer inf: the loop runs on 1 there (it would never end)
    pole = b.and_(b.fcmp_ordered("<=", q, c(0.0)),
                  b.fcmp_ordered("==", q, sg.call("llvm.floor", F64, q)))
    q = b.select(pole, c(1.0), q)
    s0 = sg.call("llvm.pow", F64, q, powx)
    start = b.block
    head, body, tail, done = (b.append_basic_block(f"zeta.{n}") for n in
                              ("head", "body", "tail", "done"))
    b.branch(head)
    b.position_at_end(head)
    s, a, t, i = b.phi(F64), b.phi(F64), b.phi(F64), b.phi(I64)
    for phi, v in ((s, s0), (a, q), (t, c(0.0)),
                   (i, ir.Constant(I64, 0))):
        phi.add_incoming(v, start)
    more = b.or_(b.icmp_signed("<", i, ir.Constant(I64, 9)), b.fcmp_ordered("<=", a, c(9.0)))
    b.cbranch(more, body, tail)
    b.position_at_end(body)
    a1 = b.fadd(a, c(1.0))
    t1 = sg.call("llvm.pow", F64, a1, powx)
    s1 = b.fadd(s, t1)
    small = b.and_(b.fcmp_ordered("<", b.fmul(c(-machep), s1), t1),
                   b.fcmp_ordered("<", t1, b.fmul(c(machep), s1)))
    for phi, v in ((s, s1), (a, a1), (t, t1), (i, b.add(i, ir.Constant(I64, 1)))):
        phi.add_incoming(v, body)
    b.position_at_end(done)
    res = b.phi(F64)
    res.add_incoming(s1, body)
    b.position_at_end(body)
    b.cbranch(small, done, head)
    b.position_at_end(tail)
    w, acc, term, k = a, c(1.0), t, 0.0
    total = b.fsub(b.fadd(s, b.fdiv(b.fmul(term, w), c(x - 1.0))), b.fmul(c(0.5), term))
    for coef in np_zeta_constants()[0]:
        acc = b.fmul(acc, c(x + k))
        term = b.fdiv(term, w)
        tt = b.fdiv(b.fmul(acc, term), c(coef))
        total = b.fadd(total, tt)
        conv = b.fcmp_ordered("<", sg.call("llvm.fabs", F64, b.fdiv(tt, total)), c(machep))
        nxt = b.append_basic_block("zeta.next")
        res.add_incoming(total, b.block)
        b.cbranch(conv, done, nxt)
        b.position_at_end(nxt)
        k += 1.0
        acc = b.fmul(acc, c(x + k))
        term = b.fdiv(term, w)
        k += 1.0
    res.add_incoming(total, b.block)
    b.branch(done)
    b.position_at_end(done)
    return b.select(pole, c(math.inf), res)


def polygamma(sg, x, n):
    """The n-th derivative of digamma: digamma, trigamma, or (-1)^(n+1) n! zeta(n + 1, x)."""
    if n < 2:
        return unary("digamma" if n == 0 else "trigamma")(sg, x)
    single = x.dt == "float32"
    v = sg.b.fpext(x.v, F64) if single else x.v
    scale = (1.0 if (n + 1) % 2 == 0 else -1.0) * float(math.factorial(n))
    r = sg.b.fmul(ir.Constant(F64, scale), _zeta(sg, float(n + 1), v))
    return Scalar(sg.b.fptrunc(r, F32) if single else r, x.dt)
