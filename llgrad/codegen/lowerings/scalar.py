"""Typed scalar code: llgrad dtypes as LLVM types, constants, casts and arithmetic.

A `Scalar` pairs an LLVM value with its llgrad dtype. In registers a bool is an i1; in
memory it is a byte (0 or 1), as NumPy stores it. `ScalarGen` wraps an IRBuilder with
dtype-aware operations (float vs signed vs unsigned integer), so op lowerings are written
once for every dtype. Everything here is straight-line code (selects, no branches), so
loops built from it vectorise."""
from collections import namedtuple

from llvmlite import ir

Scalar = namedtuple("Scalar", "v dt")

I1, I8, I16, I32, I64 = (ir.IntType(n) for n in (1, 8, 16, 32, 64))
F32, F64 = ir.FloatType(), ir.DoubleType()
PTR = ir.PointerType()

_MEM = {"float32": F32, "float64": F64, "int64": I64, "int32": I32, "int16": I16,
        "int8": I8, "uint8": I8, "bool": I8}
DTYPES = frozenset(_MEM)
FLOATS = frozenset({"float32", "float64"})
ITEMSIZE = {"float32": 4, "float64": 8, "int64": 8, "int32": 4, "int16": 2, "int8": 1,
            "uint8": 1, "bool": 1}
# complex values are only held in buffers, computed by NumPy called back from native code
# (lowerings/complex_region.py): no op's loop reads them
OPAQUE = frozenset({"complex64", "complex128"})
_MEM.update({"complex64": ir.ArrayType(F32, 2), "complex128": ir.ArrayType(F64, 2)})
ITEMSIZE.update({"complex64": 8, "complex128": 16})


def mem_type(dt):
    return _MEM[dt]


def reg_type(dt):
    return I1 if dt == "bool" else _MEM[dt]


def is_float(dt):
    return dt in FLOATS


def is_unsigned(dt):
    return dt in ("uint8", "bool")


def _suffix(t):
    if t == F32:
        return "f32"
    if t == F64:
        return "f64"
    return f"i{t.width}"


class ScalarGen:
    """dtype-aware scalar operations on one IRBuilder."""

    def __init__(self, module, builder):
        self.module = module
        self.b = builder

    # ---- intrinsics -------------------------------------------------------------------
    def intrinsic(self, name, ret, args):
        full = f"{name}.{_suffix(ret if name not in ('llvm.abs',) else args[0])}"
        fn = self.module.globals.get(full)
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(ret, args), name=full)
        return fn

    def call(self, name, t, *args):
        return self.b.call(self.intrinsic(name, t, [a.type for a in args]), list(args))

    # ---- constants and memory ---------------------------------------------------------
    def const(self, value, dt):
        t = reg_type(dt)
        if dt == "bool":
            return Scalar(ir.Constant(I1, int(bool(value))), dt)
        if is_float(dt):
            return Scalar(ir.Constant(t, float(value)), dt)
        v = int(value)
        bits = t.width
        v &= (1 << bits) - 1                   # two's complement, wrapping as NumPy casts do
        if v >= 1 << (bits - 1):
            v -= 1 << bits
        return Scalar(ir.Constant(t, v), dt)

    def load(self, ptr, dt, align=None):
        v = self.b.load(ptr, typ=mem_type(dt), align=align or ITEMSIZE[dt])
        if dt == "bool":
            v = self.b.icmp_unsigned("!=", v, ir.Constant(I8, 0))
        return Scalar(v, dt)

    def store(self, s, ptr, align=None):
        v = s.v
        if s.dt == "bool":
            v = self.b.zext(v, I8)
        self.b.store(v, ptr, align=align or ITEMSIZE[s.dt])

    # ---- casts --------------------------------------------------------------------------
    def cast(self, s, dt):
        """NumPy's astype for one element (float -> int truncates toward zero)."""
        if s.dt == dt:
            return s
        b, v, src = self.b, s.v, s.dt
        dst_t = reg_type(dt)
        if dt == "bool":
            if is_float(src):
                return Scalar(b.fcmp_unordered("!=", v, ir.Constant(v.type, 0.0)), dt)
            return Scalar(b.icmp_unsigned("!=", v, ir.Constant(v.type, 0)), dt)
        if is_float(dt):
            if is_float(src):
                w = b.fpext(v, dst_t) if dt == "float64" else b.fptrunc(v, dst_t)
            elif is_unsigned(src):
                w = b.uitofp(v, dst_t)
            else:
                w = b.sitofp(v, dst_t)
            return Scalar(w, dt)
        if is_float(src):
            # NumPy's C cast as x86 compiles it: to int64, or to int32 and then wrapped to a
            # narrower type; NaN and values out of that range give its smallest value (the
            # "integer indefinite"), where LLVM's fptosi would give poison
            wide = I64 if dst_t.width == 64 else ir.IntType(32)
            lim = float(2 ** (wide.width - 1))
            ok = b.and_(b.fcmp_ordered(">=", v, ir.Constant(v.type, -lim)),
                        b.fcmp_ordered("<", v, ir.Constant(v.type, lim)))
            r = b.select(ok, b.fptosi(v, wide), ir.Constant(wide, -(2 ** (wide.width - 1))))
            return Scalar(r if wide.width == dst_t.width else b.trunc(r, dst_t), dt)
        sw = v.type.width
        if sw == dst_t.width:
            return Scalar(v, dt)
        if sw > dst_t.width:
            return Scalar(b.trunc(v, dst_t), dt)
        return Scalar(b.zext(v, dst_t) if is_unsigned(src) else b.sext(v, dst_t), dt)

    def truth(self, s):
        """Python truthiness of an element as an i1 (NaN is true, as in NumPy)."""
        return self.cast(s, "bool").v

    # ---- arithmetic (operands share a dtype) ------------------------------------------
    def add(self, x, y):
        if x.dt == "bool":
            return Scalar(self.b.or_(x.v, y.v), x.dt)
        f = self.b.fadd if is_float(x.dt) else self.b.add
        return Scalar(f(x.v, y.v), x.dt)

    def sub(self, x, y):
        f = self.b.fsub if is_float(x.dt) else self.b.sub
        return Scalar(f(x.v, y.v), x.dt)

    def mul(self, x, y):
        if x.dt == "bool":
            return Scalar(self.b.and_(x.v, y.v), x.dt)
        f = self.b.fmul if is_float(x.dt) else self.b.mul
        return Scalar(f(x.v, y.v), x.dt)

    def div(self, x, y):
        return Scalar(self.b.fdiv(x.v, y.v), x.dt)

    def neg(self, x):
        if is_float(x.dt):
            return Scalar(self.b.fneg(x.v), x.dt)
        return Scalar(self.b.neg(x.v), x.dt)

    def fma(self, a, b, c):
        """a*b + c on raw float values (fused where the target has FMA)."""
        return self.call("llvm.fmuladd", a.type, a, b, c)

    def fused(self, a, b, c):
        """a * b + c of Scalars rounded once (llvm.fma, not fmuladd): ir/fused_madd.py's
        values, which ATen's kernels compute (vec::fmadd)."""
        return Scalar(self.call("llvm.fma", a.v.type, a.v, b.v, c.v), a.dt)

    def select(self, cond, x, y):
        return Scalar(self.b.select(cond, x.v, y.v), x.dt)

    def cmp(self, op, x, y):
        """op in < <= > >= == != with NumPy's NaN behaviour (only != is true on NaN)."""
        if is_float(x.dt):
            if op == "!=":
                return Scalar(self.b.fcmp_unordered("!=", x.v, y.v), "bool")
            return Scalar(self.b.fcmp_ordered(op, x.v, y.v), "bool")
        f = self.b.icmp_unsigned if is_unsigned(x.dt) else self.b.icmp_signed
        return Scalar(f(op, x.v, y.v), "bool")

    def isnan(self, x):
        return self.b.fcmp_unordered("uno", x.v, x.v)

    def maximum(self, x, y):
        """np.maximum: NaN-propagating."""
        if is_float(x.dt):
            return Scalar(self.call("llvm.maximum", x.v.type, x.v, y.v), x.dt)
        name = "llvm.umax" if is_unsigned(x.dt) else "llvm.smax"
        return Scalar(self.call(name, x.v.type, x.v, y.v), x.dt)

    def minimum(self, x, y):
        if is_float(x.dt):
            return Scalar(self.call("llvm.minimum", x.v.type, x.v, y.v), x.dt)
        name = "llvm.umin" if is_unsigned(x.dt) else "llvm.smin"
        return Scalar(self.call(name, x.v.type, x.v, y.v), x.dt)

    def np_maximum(self, x, y):
        """np.maximum to the sign of zero: at a tie (+0 vs -0 included) the second operand
        (llvm.maximum orders -0 below +0; NumPy, and PyTorch's vector loops, keep y)."""
        m = self.maximum(x, y)
        return self.select(self.cmp("==", x, y).v, y, m) if is_float(x.dt) else m

    def np_minimum(self, x, y):
        m = self.minimum(x, y)
        return self.select(self.cmp("==", x, y).v, y, m) if is_float(x.dt) else m

    def abs(self, x):
        if is_float(x.dt):
            return Scalar(self.call("llvm.fabs", x.v.type, x.v), x.dt)
        if is_unsigned(x.dt):
            return x
        fn = self.intrinsic("llvm.abs", x.v.type, [x.v.type, I1])
        return Scalar(self.b.call(fn, [x.v, ir.Constant(I1, 0)]), x.dt)
