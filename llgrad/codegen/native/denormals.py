"""Matrix products that treat subnormal floats as zero: a wrapper, in LLVM IR, around a BLAS
routine that sets the x86 MXCSR's DAZ and FTZ bits for the call and puts the caller's back.

Why: OpenBLAS's kernels take a microcode assist on every subnormal operand. A weight
gradient whose upstream gradient held subnormals (GELU's derivative, exp(-x^2 / 2), at
|x| in 13..14; a softmax's probabilities of masked or far logits; saturated sigmoids and
tanh) ran 512x512 by 512x128 in 125 ms against 0.7 ms (176x), and a GELU layer's training
step 8x PyTorch's. PyTorch's GEMM (MKL) does not slow down on them, and XLA flushes
subnormals throughout. A product's subnormal inputs (magnitudes below 1.2e-38 in float32,
2.2e-308 in float64) are read as 0, and subnormal results come out as 0: a difference of
at most that times K, beneath every other rounding. MXCSR is per thread, so each chunk on
the pool sets and restores its own; elsewhere than x86-64 the routine is called as it is."""
import platform

from llvmlite import ir

DAZ_FTZ = 0x8040        # MXCSR bits 6 (denormals are zero) and 15 (flush to zero)


def supported():
    return platform.machine() in ("x86_64", "AMD64")


def flushed(mod, real, name):
    """An internal function of mod with real's signature that calls real with subnormals
    flushed (or real itself where the host has no MXCSR)."""
    if not supported():
        return real
    fn = ir.Function(mod, real.function_type, name)
    fn.linkage = "internal"
    i32 = ir.IntType(32)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    saved, flush = b.alloca(i32), b.alloca(i32)
    st = mod.declare_intrinsic("llvm.x86.sse.stmxcsr", fnty=ir.FunctionType(
        ir.VoidType(), [ir.PointerType()]))
    ld = mod.declare_intrinsic("llvm.x86.sse.ldmxcsr", fnty=ir.FunctionType(
        ir.VoidType(), [ir.PointerType()]))
    b.call(st, [saved])
    b.store(b.or_(b.load(saved, typ=i32), ir.Constant(i32, DAZ_FTZ)), flush)
    b.call(ld, [flush])
    b.call(real, list(fn.args))
    b.call(ld, [saved])
    b.ret_void()
    return fn
