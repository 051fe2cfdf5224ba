"""The native kernel of eager add / sub with an alpha over two arrays: `void eager_kernel(ptr
out, ptr a, ptr b, i64 n, <dtype> alpha)` computes out[i] = fma(b[i], alpha, a[i]), rounded
once as ATen's vec::fmadd rounds it (SGD's p.add_(g, alpha=-lr)); alpha is an argument, so
one kernel per dtype serves every learning rate. NumPy has no fused multiply-add: its exact
emulation (ir/fused_madd.py) made eight float64 passes, 367 us on a 784 x 128 weight against
torch's 8. `build_fma`: `void eager_kernel(ptr out, ptr x, ptr y, ptr z, i64 n)`, out[i] =
fma(x[i], y[i], z[i]) (addcmul's value * t1 * t2 + self, lerp's with a tensor weight)."""
from llvmlite import ir

from .eager_cache import ENTRY
from .lowerings.loops import for_range, loop_hints
from .lowerings.scalar import F32, F64, I64, PTR
from .native import jit, keys


def key(dtype):
    return keys.key_for(repr(("axpy", dtype)), "eager-axpy-1")


def build(dtype):
    """The address of the kernel (a jit.CodeAddress), from memory, the disk cache or LLVM."""
    k = key(dtype)
    compiled = jit.lookup(k, ENTRY)
    if compiled is None:
        compiled = jit.compile_module(_module(dtype), [ENTRY], key=k)
    return compiled.address(ENTRY)


def _module(dtype):
    ft = F32 if dtype == "float32" else F64
    mod = jit.new_module(f"eager_axpy_{dtype}")
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [PTR, PTR, PTR, I64, ft]), ENTRY)
    out, a, b_, n, alpha = fn.args
    for p in (out, a, b_):
        p.add_attribute("noalias")      # (out is fresh; a and b are only read)
    fma = ir.Function(mod, ir.FunctionType(ft, [ft, ft, ft]),
                      f"llvm.fma.{'f32' if dtype == 'float32' else 'f64'}")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    hints = loop_hints(mod, vectorize_width=jit.jit().vector_bits // (32 if ft == F32 else 64))
    with for_range(b, 0, n, name="i", hints=hints) as i:
        x = b.load(b.gep(a, [i], inbounds=True, source_etype=ft), typ=ft)
        y = b.load(b.gep(b_, [i], inbounds=True, source_etype=ft), typ=ft)
        b.store(b.call(fma, [y, alpha, x]), b.gep(out, [i], inbounds=True, source_etype=ft))
    b.ret_void()
    return mod


def fma_key(dtype):
    return keys.key_for(repr(("fma3", dtype)), "eager-fma3-1")


def build_fma(dtype):
    """The address of the three-array fma kernel (as build)."""
    k = fma_key(dtype)
    compiled = jit.lookup(k, ENTRY)
    if compiled is None:
        compiled = jit.compile_module(_fma_module(dtype), [ENTRY], key=k)
    return compiled.address(ENTRY)


def _fma_module(dtype):
    ft = F32 if dtype == "float32" else F64
    mod = jit.new_module(f"eager_fma3_{dtype}")
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [PTR, PTR, PTR, PTR, I64]), ENTRY)
    out, x, y, z, n = fn.args
    for p in (out, x, y, z):
        p.add_attribute("noalias")      # (out is fresh; x, y and z are only read)
    fma = ir.Function(mod, ir.FunctionType(ft, [ft, ft, ft]),
                      f"llvm.fma.{'f32' if dtype == 'float32' else 'f64'}")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    hints = loop_hints(mod, vectorize_width=jit.jit().vector_bits // (32 if ft == F32 else 64))
    with for_range(b, 0, n, name="i", hints=hints) as i:
        v = [b.load(b.gep(q, [i], inbounds=True, source_etype=ft), typ=ft) for q in (x, y, z)]
        b.store(b.call(fma, v), b.gep(out, [i], inbounds=True, source_etype=ft))
    b.ret_void()
    return mod
