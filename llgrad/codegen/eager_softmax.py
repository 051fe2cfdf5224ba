"""Native kernels for eager softmax and log_softmax over the last dim of a C-contiguous
float tensor: `void eager_kernel(ptr out, ptr x, i64 rows, i64 n)`, the rows one after the
other, n elements each.

Why: NumPy's softmax is five passes with a temporary per pass (max, subtract, exp, sum,
divide): an attention's scores took 3.6x torch's time. Here each row is read three times
(max; exp, stored and summed; scaled) by the passes of the compiled lowering
(lowerings/ops_norm.py: a NaN-propagating max, exp from vecmath, the sum in float64, then the
division by it or the subtraction of its log), so eager and compiled code compute each
element by the same instructions. Row length and count are arguments: one kernel per (op,
dtype) serves every shape, cached on disk like every kernel."""
from llvmlite import ir

from .eager_cache import ENTRY
from .lowerings import vecmath
from .lowerings.loops import for_range, loop_hints
from .lowerings.scalar import F64, I64, PTR, Scalar, ScalarGen, mem_type
from .native import jit, keys

OPS = ("softmax", "log_softmax")


def HINTS(mod, dt):
    return loop_hints(mod, vectorize_width=jit.jit().vector_bits // (32 if dt == "float32" else 64),
                      interleave_count=1)


def key(op_name, dtype):
    return keys.key_for(repr(("last-dim", op_name, dtype)), "eager-softmax-2")


def build(op_name, dtype):
    """The address of the kernel (a jit.CodeAddress), from memory, the disk cache or LLVM."""
    k = key(op_name, dtype)
    compiled = jit.lookup(k, ENTRY)
    if compiled is None:
        compiled = jit.compile_module(_module(op_name, dtype), [ENTRY], key=k)
    return compiled.address(ENTRY)


def _module(op_name, dt):
    mod = jit.new_module(f"eager_{op_name}_{dt}")
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [PTR, PTR, I64, I64]), ENTRY)
    out, x, rows, n = fn.args
    for p in (out, x):
        p.add_attribute("noalias")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    sg = ScalarGen(mod, b)
    et = mem_type(dt)
    m_slot = b.alloca(sg.const(0, dt).v.type, name="m")
    s_slot = b.alloca(F64, name="s")

    def at(base, row_start, j):
        return b.gep(base, [b.add(row_start, j)], inbounds=True, source_etype=et)

    with for_range(b, 0, rows, name="r") as r:
        first = b.mul(r, n)
        _row_max(b, sg, mod, dt, x, first, n, m_slot)
        m = Scalar(b.load(m_slot, typ=m_slot.allocated_type), dt)
        b.store(sg.const(0, "float64").v, s_slot)
        with for_range(b, 0, n, name="je", hints=HINTS(mod, dt)) as j:
            e = vecmath.exp(sg, sg.sub(sg.load(at(x, first, j), dt), m))
            if op_name == "softmax":        # (kept in the result for the last pass)
                sg.store(e, at(out, first, j))
            cur = b.load(s_slot, typ=F64)
            b.store(b.fadd(cur, sg.cast(e, "float64").v, flags=("reassoc",)), s_slot)
        s = sg.cast(Scalar(b.load(s_slot, typ=F64), "float64"), dt)
        if op_name == "softmax":
            with for_range(b, 0, n, name="jd") as j:
                sg.store(sg.div(sg.load(at(out, first, j), dt), s), at(out, first, j))
        else:
            ls = vecmath.log(sg, s)
            with for_range(b, 0, n, name="jl") as j:
                v = sg.sub(sg.sub(sg.load(at(x, first, j), dt), m), ls)
                sg.store(v, at(out, first, j))
    b.ret_void()
    return mod


def _row_max(b, sg, mod, dt, x, first, n, m_slot):
    """The row's NaN-propagating max into m_slot, a vector of lanes at a time: llvm.maximum
    is exactly associative and commutative (NaN wins, -0 < +0), so lanes then a reduction
    give the one-after-the-other max's value; a chain of scalar maxima (the vectoriser does
    not take this reduction) cost 4x PyTorch on rows of 100."""
    et = mem_type(dt)
    lanes = jit.jit().vector_bits // (32 if dt == "float32" else 64)
    vt = ir.VectorType(et, lanes)
    suffix = f"v{lanes}{'f32' if dt == 'float32' else 'f64'}"
    vmax = _declare(mod, f"llvm.maximum.{suffix}", vt, [vt, vt])
    reduce = _declare(mod, f"llvm.vector.reduce.fmaximum.{suffix}", et, [vt])
    acc = b.alloca(vt, name="acc")
    b.store(ir.Constant(vt, [float("-inf")] * lanes), acc)
    whole = b.mul(b.sdiv(n, ir.Constant(I64, lanes)), ir.Constant(I64, lanes))
    with for_range(b, 0, whole, step=lanes, name="jv") as j:
        v = b.load(b.gep(x, [b.add(first, j)], inbounds=True, source_etype=et), typ=vt)
        v.align = 4 if dt == "float32" else 8       # (an element's alignment, not a vector's)
        b.store(b.call(vmax, [b.load(acc, typ=vt), v]), acc)
    b.store(b.call(reduce, [b.load(acc, typ=vt)]), m_slot)
    with for_range(b, whole, n, name="jm") as j:
        cur = Scalar(b.load(m_slot, typ=m_slot.allocated_type), dt)
        v = sg.load(b.gep(x, [b.add(first, j)], inbounds=True, source_etype=et), dt)
        b.store(sg.maximum(cur, v).v, m_slot)


def _declare(mod, name, ret, args):
    fn = mod.globals.get(name)
    return fn if fn is not None else ir.Function(mod, ir.FunctionType(ret, args), name=name)
