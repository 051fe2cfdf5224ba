"""ATen's float32 normal_fill as one native loop: `void box_muller32(ptr u, ptr out, i64 blocks,
float mean, float std, i32 affine)`.

u holds 16 uniforms per block; each block's first eight, one minus them, give the radii
sqrt(-2 log u1) and its last eight the angles 2 pi u2, through avx_mathfun's log and sincos
(Cephes polynomials) with the multiply-adds ATen's build fuses: the operations of
ir/torch_vecmath.py in their order, each a float32 instruction (llvm.fma one rounding), so
the values are PyTorch's bits. out gets the cosines' eight then the sines' eight, times std
plus mean in one fused step when affine is set. Why: in NumPy those two functions are ~60
passes over the array, 5x torch's whole randn."""
from llvmlite import ir

from ..ir import torch_vecmath as vm
from .lowerings.loops import for_range
from .native import jit, keys

ENTRY = "box_muller32"
F32, I32, I64 = ir.FloatType(), ir.IntType(32), ir.IntType(64)
PTR = ir.PointerType()


def build():
    """The loop's address (a jit.CodeAddress), from memory, the disk cache or LLVM."""
    key = keys.key_for("box-muller-32-2", ENTRY)
    compiled = jit.lookup(key, ENTRY)
    if compiled is None:
        compiled = jit.compile_module(_module(), [ENTRY], key=key)
    return compiled.address(ENTRY)


class _Ops:
    """float32 arithmetic on one IRBuilder (constants as float32 values of the module)."""

    def __init__(self, b, mod):
        self.b = b
        self.fma_fn = mod.declare_intrinsic("llvm.fma", [F32], ir.FunctionType(F32, [F32] * 3))
        self.sqrt_fn = mod.declare_intrinsic("llvm.sqrt", [F32])

    def c(self, v):
        return ir.Constant(F32, float(v))

    def fma(self, a, x, y):
        return self.b.call(self.fma_fn, [a, x, y])

    def mul(self, a, x):
        return self.b.fmul(a, x)

    def add(self, a, x):
        return self.b.fadd(a, x)


def _log(o, x):
    """avx_mathfun's log_ps of one float32 (torch_vecmath.log_ps)."""
    b = o.b
    invalid = b.not_(b.fcmp_ordered(">", x, o.c(0.0)))
    low = b.fcmp_ordered(">", x, o.c(vm._MIN_NORM))
    bits = b.bitcast(b.select(low, x, o.c(vm._MIN_NORM)), I32)
    e = b.fadd(b.sitofp(b.sub(b.ashr(bits, ir.Constant(I32, 23)), ir.Constant(I32, 0x7f)), F32),
               o.c(1.0))
    m = b.bitcast(b.or_(b.and_(bits, ir.Constant(I32, ~0x7f800000)),
                        ir.Constant(I32, 0x3f000000)), F32)
    small = b.fcmp_ordered("<", m, o.c(vm._SQRTHF))
    e = b.select(small, b.fsub(e, o.c(1.0)), e)
    x = b.fadd(b.fsub(m, o.c(1.0)), b.select(small, m, o.c(0.0)))
    z = o.mul(x, x)
    y = o.c(vm._LOG_P[0])
    for p in vm._LOG_P[1:]:
        y = o.fma(y, x, o.c(p))
    y = o.fma(o.mul(y, x), z, o.mul(e, o.c(vm._LOG_Q1)))
    y = o.fma(z, o.c(-0.5), y)
    x = o.add(o.mul(e, o.c(vm._LOG_Q2)), o.add(x, y))
    return b.select(invalid, o.c(float("nan")), x)


def _sincos(o, x):
    """avx_mathfun's sincos_ps of one float32 (torch_vecmath.sincos_ps): (sin, cos)."""
    b = o.b
    bits = b.bitcast(x, I32)
    neg = b.icmp_signed("<", bits, ir.Constant(I32, 0))
    x = b.bitcast(b.and_(bits, ir.Constant(I32, 0x7fffffff)), F32)
    j = b.fptosi(o.mul(x, o.c(vm._FOPI)), I32)
    j = b.and_(b.add(j, ir.Constant(I32, 1)), ir.Constant(I32, ~1))
    y = b.sitofp(j, F32)
    for dp in vm._DP:
        x = o.fma(y, o.c(dp), x)
    four = ir.Constant(I32, 4)
    sin_neg = b.xor(neg, b.icmp_signed("!=", b.and_(j, four), ir.Constant(I32, 0)))
    cos_neg = b.icmp_signed("!=", b.and_(b.not_(b.sub(j, ir.Constant(I32, 2))), four),
                            ir.Constant(I32, 0))
    first = b.icmp_signed("==", b.and_(j, ir.Constant(I32, 2)), ir.Constant(I32, 0))
    z = o.mul(x, x)
    c0, c1, c2 = vm._COS_P
    s0, s1, s2 = vm._SIN_P
    yc = o.fma(o.fma(o.c(c0), z, o.c(c1)), z, o.c(c2))
    yc = o.add(o.fma(o.mul(yc, z), z, b.fneg(o.mul(z, o.c(0.5)))), o.c(1.0))
    ys = o.fma(o.fma(o.c(s0), z, o.c(s1)), z, o.c(s2))
    ys = o.fma(o.mul(ys, z), x, x)
    s, c = b.select(first, ys, yc), b.select(first, yc, ys)
    return b.select(sin_neg, b.fneg(s), s), b.select(cos_neg, b.fneg(c), c)


def _module():
    mod = jit.new_module("box_muller32")
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [PTR, PTR, I64, F32, F32, I32]), ENTRY)
    u, out, blocks, mean, std, affine = fn.args
    for p in (u, out):
        p.add_attribute("noalias")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    o = _Ops(b, mod)
    fused = b.icmp_signed("!=", affine, ir.Constant(I32, 0))
    with for_range(b, 0, blocks, name="blk") as blk, for_range(b, 0, 8, name="lane") as lane:
        base = b.mul(blk, ir.Constant(I64, 16))
        first, second = b.add(base, lane), b.add(base, b.add(lane, ir.Constant(I64, 8)))

        def at(p, i):
            return b.gep(p, [i], inbounds=True, source_etype=F32)
        u1 = b.fsub(o.c(1.0), b.load(at(u, first), typ=F32))
        u2 = b.load(at(u, second), typ=F32)
        radius = b.call(o.sqrt_fn, [o.mul(o.c(-2.0), _log(o, u1))])
        sin, cos = _sincos(o, o.mul(o.c(vm._F(2.0 * 3.141592653589793)), u2))
        c, s = o.mul(radius, cos), o.mul(radius, sin)
        c = b.select(fused, o.fma(c, std, mean), c)
        s = b.select(fused, o.fma(s, std, mean), s)
        b.store(c, at(out, first))
        b.store(s, at(out, second))
    b.ret_void()
    return mod
