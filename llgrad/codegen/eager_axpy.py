"""The native kernel of eager add / sub with an alpha over two arrays: `void eager_kernel(ptr
out, ptr a, ptr b, i64 n, <dtype> alpha)` computes out[i] = fma(b[i], alpha, a[i]), rounded
once as ATen's vec::fmadd rounds it (SGD's p.add_(g, alpha=-lr)); alpha is an argument, so
one kernel per dtype serves every learning rate. NumPy has no fused multiply-add: its exact
emulation (ir/fused_madd.py) made eight float64 passes, 367 us on a 784 x 128 weight against
torch's 8. `build(dtype, "fma3")`: `void eager_kernel(ptr out, ptr x, ptr y, ptr z, i64 n)`, out[i] =
fma(x[i], y[i], z[i]) (addcmul's value * t1 * t2 + self, lerp's with a tensor weight)."""
from llvmlite import ir

from .eager_cache import ENTRY
from .lowerings.loops import for_range, loop_hints
from .lowerings.scalar import F32, F64, I64, PTR
from .native import jit, keys


# kind: (the key's version, the arrays with out first, whether alpha is an argument)
_KINDS = {"axpy": ("eager-axpy-1", 3, True), "fma3": ("eager-fma3-1", 4, False)}


def key(dtype, kind="axpy"):
    return keys.key_for(repr((kind, dtype)), _KINDS[kind][0])


def build(dtype, kind="axpy"):
    """The address of the kernel (a jit.CodeAddress), from memory, the disk cache or LLVM."""
    k = key(dtype, kind)
    compiled = jit.lookup(k, ENTRY)
    if compiled is None:
        compiled = jit.compile_module(_module(dtype, kind), [ENTRY], key=k)
    return compiled.address(ENTRY)


def _module(dtype, kind):
    ft = F32 if dtype == "float32" else F64
    _, arrays, with_alpha = _KINDS[kind]
    mod = jit.new_module(f"eager_{kind}_{dtype}")
    args = [PTR] * arrays + [I64] + ([ft] if with_alpha else [])
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), args), ENTRY)
    out, *ins = fn.args[:arrays]
    for p in fn.args[:arrays]:
        p.add_attribute("noalias")      # (out is fresh; the inputs are only read)
    fma = ir.Function(mod, ir.FunctionType(ft, [ft, ft, ft]),
                      f"llvm.fma.{'f32' if dtype == 'float32' else 'f64'}")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    hints = loop_hints(mod, vectorize_width=jit.jit().vector_bits // (32 if ft == F32 else 64))
    with for_range(b, 0, fn.args[arrays], name="i", hints=hints) as i:
        v = [b.load(b.gep(q, [i], inbounds=True, source_etype=ft), typ=ft) for q in ins]
        if with_alpha:                  # (a + alpha * b: fma(b, alpha, a))
            v = [v[1], fn.args[-1], v[0]]
        b.store(b.call(fma, v), b.gep(out, [i], inbounds=True, source_etype=ft))
    b.ret_void()
    return mod
