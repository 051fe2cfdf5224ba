"""Eager products run together on llgrad's threads: `llgrad_eager_bgemm_<dtype>(ptr recs,
i64 count)` runs `count` products, record i four i64 words: the addresses of A, B and C and
of the product's params (i64 transA, transB, M, N, K, lda, ldb, ldc, pack), each product one
unsplit OpenBLAS call (blas.py's `llgrad_serial.` entry). With pack set (K * N at most
PACK_LIMIT), B (a transposed view: N x K with row stride ldb) is first copied as K x N
row-major into a stack slot as large as the largest such B (gemm.py's transposing copy)
and multiplied as it is:
OpenBLAS's kernel for a transposed B ran attention's 64 x 32 x 64 products at half the
speed (eager q @ k^T for 8 x 4 heads: 107 us against 57 for the same products with B
row-major). The records are what eager_split.py's splitter divides among the threads (one
pointer): a stack of attention's products (its batch). Each product is the same call on any thread, so results
do not depend on the thread count."""
from llvmlite import ir

from .lowerings import gemm as small
from .lowerings.gemm import carried_range
from .lowerings.ops_matmul import NO_TRANS, ROW_MAJOR, blas_gemm_function
from .lowerings.scalar import F32, F64, I32, I64, PTR
from .native import jit, keys

PARAMS = ("ta", "tb", "m", "n", "k", "lda", "ldb", "ldc", "pack")
RECORD_WORDS = 4                # A, B, C, params
PACK_LIMIT = 1 << 14            # elements of B copied per product (a 64 KiB stack slot)


def name(dtype):
    return f"llgrad_eager_bgemm_{dtype}"


def build(found):
    """The compiled module for the BLAS routines found (blas.gemm_symbols(): {dtype:
    (symbol, int bits)}), from the disk cache or LLVM; its serial entries and the
    transposing copies are made resolvable first."""
    for dt in found:
        small.ensure_library(dt, "transpose")
    desc = ";".join(f"{dt}={sym}/{bits}" for dt, (sym, bits) in sorted(found.items()))
    k = keys.key_for("llgrad eager bgemm", f"{desc};params={','.join(PARAMS)};record={RECORD_WORDS};pack={PACK_LIMIT}")
    names = [name(dt) for dt in sorted(found)]
    return jit.load_private(k, names) or \
        jit.compile_private(module(found), names, key=k, opt=True)


def module(found):
    mod = jit.new_module("llgrad_eager_bgemm")
    for dt, (sym, bits) in sorted(found.items()):
        _kernel(mod, dt, blas_gemm_function(mod, sym, bits, dt, serial=True),
                small.transpose_function(mod, dt), I64 if bits == 64 else I32)
    return mod


def _c(v, t=I64):
    return ir.Constant(t, v)


def _kernel(mod, dt, gemm, transpose, it):
    ft = F32 if dt == "float32" else F64
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [PTR, I64]), name(dt))
    recs, count = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    done = fn.append_basic_block("done")
    work = fn.append_basic_block("work")
    b.cbranch(b.icmp_signed(">", count, _c(0)), work, done)
    b.position_at_end(work)

    def record(i):
        pa, pb, pc, pp = (
            b.inttoptr(b.load(b.gep(recs, [b.add(b.mul(i, _c(RECORD_WORDS)), _c(j))],
                                    inbounds=True, source_etype=I64), typ=I64), PTR)
            for j in range(RECORD_WORDS))
        return (pa, pb, pc) + tuple(
            b.load(b.gep(pp, [_c(j)], inbounds=True, source_etype=I64), typ=I64)
            for j in range(len(PARAMS)))

    # the stack slot: the largest B a record copies (K * N <= PACK_LIMIT), one element where
    # none does (records that copy no B reserve nothing)
    with carried_range(b, count, [_c(1)], "s") as (i, (need,), out):
        *_, n, k, _, _, _, pack = record(i)
        size = b.select(b.icmp_signed("!=", pack, _c(0)), b.mul(k, n), _c(1))
        out.append(b.select(b.icmp_signed(">", size, need), size, need))
    slot = b.alloca(ft, size=out[0])
    narrow = (lambda v: v) if it == I64 else (lambda v: b.trunc(v, it))
    with carried_range(b, count, [], "i") as (i, _, out):
        pa, pb, pc, ta, tb, m, n, k, lda, ldb, ldc, pack = record(i)
        packing = b.icmp_signed("!=", pack, _c(0))
        with b.if_then(packing):
            b.call(transpose, [pb, ldb, slot, n, k])
        # (packed, B is K x N row-major: no transpose, leading dimension N)
        pb = b.select(packing, slot, pb)
        tb = b.select(packing, _c(NO_TRANS), tb)
        ldb = b.select(packing, n, ldb)
        b.call(gemm, [_c(ROW_MAJOR, I32), b.trunc(ta, I32), b.trunc(tb, I32), narrow(m),
                      narrow(n), narrow(k), ir.Constant(ft, 1.0), pa, narrow(lda), pb,
                      narrow(ldb), ir.Constant(ft, 0.0), pc, narrow(ldc)])
    b.branch(done)
    b.position_at_end(done)
    b.ret_void()
    return fn
