"""Eager native kernels over llgrad's threads: `split_P_E(kernel, ptrs, units, unit_bytes,
extra, align, t)` runs a kernel `void kernel(ptr p_1, ..., ptr p_P, i64 count[, i64 extra])`
(eager_kernels.py's elementwise loops and their backwards: count elements; eager_softmax.py's
rows: count rows of `extra` elements) as t chunks of its units on the thread pool
(lowerings/pool.py's `llgrad_parallel_run`), each chunk the same kernel called on its own
range: every pointer advanced by lo * unit_bytes.

Why: an eager GELU or softmax over a transformer's activations ran on one thread while torch
eager's ran on two (GELU's backward 321 us against torch's 307 at 2 threads for the block's
262K-element MLP, softmax 177 against 64).

A chunk's bounds are multiples of `align` units (64 elements for the elementwise loops: a
multiple of any vector width times the vectoriser's interleave), so every element goes
through the same instructions as in one call over all of them (the vector body, or the same
scalar tail at the end): results are bitwise those of one thread. The chunks depend on t and
the sizes only; who runs which chunk changes nothing."""
from llvmlite import ir

from .lowerings.plain_threads import CHUNK, Callee, run_type
from .lowerings.scalar import I64, PTR
from .native import jit, keys
from .native.threadcount import RUN

MAX_POINTERS = 8            # out, the gradient and six saved tensors: the widest VJP loop
_CALL = ir.LiteralStructType([PTR, PTR, I64, I64])     # kernel, ptrs, unit_bytes, extra
_REC = ir.LiteralStructType([I64, I64, PTR, I64])               # lo, hi, the call, (pad)
_REC_BYTES = 32


def name(pointers, extra):
    """The exported entry for kernels of `pointers` pointers and `extra` (0 or 1) trailing
    i64 beyond the count."""
    return f"llgrad_eager_split_{pointers}_{extra}"


NAMES = [name(p, e) for p in range(1, MAX_POINTERS + 1) for e in (0, 1)]


def key():
    return keys.key_for("llgrad eager split", f"pointers<={MAX_POINTERS};rec={_REC_BYTES};call=4")


def build():
    """The compiled module (its code kept for the process: the pool runs it), from the disk
    cache or LLVM; the caller has made `llgrad_parallel_run` resolvable (ensure_pool)."""
    k = key()
    return jit.load_private(k, NAMES) or jit.compile_private(module(), NAMES, key=k, opt=True)


def _c(v):
    return ir.Constant(I64, v)


def _field(b, p, ty, k):
    f = b.gep(p, [ir.Constant(ir.IntType(32), 0), ir.Constant(ir.IntType(32), k)],
              inbounds=True, source_etype=ty)
    f.type = PTR            # (llvmlite types a GEP's result; the module's pointers are opaque)
    return f


def module():
    mod = jit.new_module("llgrad_eager_split")
    run = ir.Function(mod, run_type(), RUN)
    for p in range(1, MAX_POINTERS + 1):
        for e in (0, 1):
            _entry(mod, run, p, e, _chunk(mod, p, e))
    return mod


def _chunk(mod, p, e):
    """ptr chunk(ptr rec): the kernel over units [lo, hi)."""
    kernel_ty = ir.FunctionType(ir.VoidType(), [PTR] * p + [I64] * (1 + e))
    fn = ir.Function(mod, CHUNK, name(p, e) + ".chunk")
    fn.linkage = "internal"
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    rec = fn.args[0]
    lo, hi = (b.load(_field(b, rec, _REC, k), typ=I64) for k in (0, 1))
    call = b.load(_field(b, rec, _REC, 2), typ=PTR)
    kernel, ptrs = (b.load(_field(b, call, _CALL, k), typ=PTR) for k in (0, 1))
    unit_bytes, extra = (b.load(_field(b, call, _CALL, k), typ=I64) for k in (2, 3))
    skip = b.mul(lo, unit_bytes)
    args = []
    for i in range(p):
        base = b.load(b.gep(ptrs, [_c(i)], inbounds=True, source_etype=PTR), typ=PTR)
        args.append(b.gep(base, [skip], inbounds=True, source_etype=ir.IntType(8)))
    args.append(b.sub(hi, lo))
    if e:
        args.append(extra)
    b.call(Callee(kernel, kernel_ty), args)
    b.ret(ir.Constant(PTR, None))
    return fn


def _entry(mod, run, p, e, chunk):
    """void split(ptr kernel, ptr ptrs, i64 units, i64 unit_bytes, i64 extra, i64 align,
    i64 t): chunk j covers [bound(j), bound(j + 1)), bound(j) = j * units / t rounded down
    to a multiple of align (bound(t) = units)."""
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [PTR, PTR] + [I64] * 5), name(p, e))
    kernel, ptrs, units, unit_bytes, extra, align, t = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    call = b.alloca(_CALL)
    call.type = PTR
    for k, v in enumerate((kernel, ptrs, unit_bytes, extra)):
        b.store(v, _field(b, call, _CALL, k))
    recs = b.alloca(_REC, size=t)
    recs.type = PTR

    def bound(j):
        x = b.sdiv(b.mul(j, units), t)
        x = b.mul(b.sdiv(x, align), align)
        return b.select(b.icmp_signed(">=", j, t), units, x)

    pre = b.block
    body, done = fn.append_basic_block("body"), fn.append_basic_block("done")
    b.branch(body)
    b.position_at_end(body)
    j = b.phi(I64, "j")
    j.add_incoming(_c(0), pre)
    r = b.gep(recs, [j], inbounds=True, source_etype=_REC)
    r.type = PTR
    nxt = b.add(j, _c(1))
    b.store(bound(j), _field(b, r, _REC, 0))
    b.store(bound(nxt), _field(b, r, _REC, 1))
    b.store(call, _field(b, r, _REC, 2))
    j.add_incoming(nxt, b.block)
    b.cbranch(b.icmp_signed("<", nxt, t), body, done)
    b.position_at_end(done)
    b.call(run, [chunk, recs, t, _c(_REC_BYTES)])
    b.ret_void()
