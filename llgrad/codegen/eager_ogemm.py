"""llgrad's own GEMM (lowerings/gemm.py) over records, for eager products split on the
threads: `llgrad_eager_ogemm_<dtype>(ptr recs, i64 count)` runs `count` products, record i
RECORD_WORDS i64 words: gemm.py's arguments in its order (M, N, K, a, ars, acs, b, brs,
bcs, c, ldc, a_scratch, b_scratch; strides in elements, the pointers as integers). The
records are what eager_split.py's splitter divides among the threads (one pointer): a
product's column blocks, one a thread (compile/eager_gemm_bound.py).

Why: an LSTM step's products (batch 32 x 128 x 512 and 32 x 512 x 128) are too small for
OpenBLAS's packing to pay: it ran them at ~65% of this machine's GEMM rate on one thread
(36 us against MKL's 23 for torch), and its split over two threads packs B again per chunk
(23 and 29 us at 2 threads). gemm.py's register-blocked kernel reads B in place and packs
only A (a few KiB): 28 us on one thread, and a column half a thread."""
from llvmlite import ir

from .lowerings import gemm as small
from .lowerings.gemm import carried_range
from .lowerings.scalar import I64, PTR
from .native import jit, keys

RECORD_WORDS = 13
_POINTERS = (3, 6, 9, 11, 12)       # the words that are addresses


def name(dtype):
    return f"llgrad_eager_ogemm_{dtype}"


def build(dtypes=("float32", "float64")):
    """The compiled module (from the disk cache or LLVM); gemm.py's libraries are made
    resolvable first."""
    for dt in dtypes:
        small.ensure_library(dt, "gemm")
    k = keys.key_for("llgrad eager ogemm", f"{','.join(dtypes)};record={RECORD_WORDS}")
    names = [name(dt) for dt in dtypes]
    return jit.load_private(k, names) or \
        jit.compile_private(module(dtypes), names, key=k, opt=True)


def module(dtypes):
    mod = jit.new_module("llgrad_eager_ogemm")
    for dt in dtypes:
        _kernel(mod, dt, small.gemm_function(mod, dt))
    return mod


def _kernel(mod, dt, gemm):
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [PTR, I64]), name(dt))
    recs, count = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    done = fn.append_basic_block("done")
    work = fn.append_basic_block("work")
    b.cbranch(b.icmp_signed(">", count, ir.Constant(I64, 0)), work, done)
    b.position_at_end(work)
    with carried_range(b, count, [], "i") as (i, _, out):
        base = b.mul(i, ir.Constant(I64, RECORD_WORDS))
        words = [b.load(b.gep(recs, [b.add(base, ir.Constant(I64, j))], inbounds=True,
                              source_etype=I64), typ=I64) for j in range(RECORD_WORDS)]
        b.call(gemm, [b.inttoptr(w, PTR) if j in _POINTERS else w
                      for j, w in enumerate(words)])
    b.branch(done)
    b.position_at_end(done)
    b.ret_void()
    return fn
