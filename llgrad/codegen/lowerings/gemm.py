"""llgrad's own GEMM, generated in LLVM IR: C (M x N, row stride ldc) = A @ B for float32
and float64. Float matmuls call it where no BLAS is found (LLGRAD_BLAS=0, or a NumPy built
without OpenBLAS), and for small products when LLGRAD_SMALL_GEMM asks (ops_matmul.py).
Against the generated i-k-j loops it replaced there, bench W1's value_and_grad went from
979 to 154 us and W2's from 97 to 23 ms; OpenBLAS, with cache blocking and hand-scheduled
kernels, stays 10-50% faster on W1's shapes, so it stays the default where it exists.

BLIS's register blocking, without its cache blocking (which small operands do not need):

- The micro-kernel computes an MR x (2 vectors) tile of C in registers: per step along K it
  loads two vectors of a row of B, broadcasts MR elements of a column of A and issues 2*MR
  FMAs (16 on AVX-512 for float32: 8 rows x 32 columns).
- The columns of the last tile are masked (masked loads and stores), so nothing is read or
  written beyond the buffers; the rows of the last tile go one at a time through a 1-row
  kernel.
- B must be unit-stride along N and A along M. An operand that is unit-stride along K
  instead (B of x @ W.T, a row-major A) is first packed into a K-major scratch buffer,
  8 x 8 blocks at a time, with an in-register transpose (three rounds of interleaving
  shuffles); edges are copied element-wise.

All sizes and strides are run-time arguments, so one copy of this code per dtype serves
every matmul of every kernel: a library module compiled once per process, or loaded from
the disk cache (ensure_library); kernels only declare it. The transposing copy is also a
library of its own: products that go to BLAS need only it (ops_matmul copies a small
transposed B to row-major with it), not the GEMM's slower-to-compile kernels."""
import threading
from contextlib import contextmanager

from llvmlite import ir

from ..native import jit, keys
from .loops import for_range, loop_hints
from .scalar import F32, F64, I1, I32, I64, PTR

_SIG = [I64, I64, I64, PTR, I64, I64, PTR, I64, I64, PTR, I64, PTR, PTR]
ARGS = "M N K a ars acs b brs bcs c ldc a_scratch b_scratch".split()


def _c(x):
    return ir.Constant(I64, x)


@contextmanager
def carried_range(b, stop, inits, name):
    """for i in range(stop) with loop-carried values: yields (i, phis, out), where the body
    sets out[:] to the next values; after the block, out holds the final values. The loop
    must run at least once (callers check stop > 0)."""
    pre = b.block
    body = b.append_basic_block(f"{name}.body")
    done = b.append_basic_block(f"{name}.done")
    b.branch(body)
    b.position_at_end(body)
    i = b.phi(I64, name)
    i.add_incoming(_c(0), pre)
    phis = []
    for v in inits:
        p = b.phi(v.type)
        p.add_incoming(v, pre)
        phis.append(p)
    out = []
    yield i, phis, out
    nxt = b.add(i, _c(1), flags=("nsw",))
    i.add_incoming(nxt, b.block)
    for p, v in zip(phis, out):
        p.add_incoming(v, b.block)
    b.cbranch(b.icmp_signed("<", nxt, stop), body, done)
    b.position_at_end(done)


class _Gen:
    """Builds the functions of one (module, dtype)."""

    def __init__(self, module, ft, vw, mr):
        self.module, self.ft, self.vw, self.mr = module, ft, vw, mr
        self.sfx = f"v{vw}{'f32' if ft == F32 else 'f64'}"
        self.vt = ir.VectorType(ft, vw)
        self.mt = ir.VectorType(I1, vw)
        self.align = ir.Constant(I32, 4 if ft == F32 else 8)
        self.zero = ir.Constant(self.vt, [0.0] * vw)

    def intrinsic(self, name, ret, args):
        full = f"llvm.{name}.{self.sfx}" + (".p0" if "masked" in name else "")
        fn = self.module.globals.get(full)
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(ret, args), full)
        return fn

    def function(self, name, args, names):
        fn = ir.Function(self.module, ir.FunctionType(ir.VoidType(), args), name)
        fn.linkage = "internal"
        for a, n in zip(fn.args, names):
            a.name = n
            if isinstance(a.type, ir.PointerType):
                a.add_attribute("noalias")
        return fn, ir.IRBuilder(fn.append_basic_block("entry"))

    # ---- vector helpers ----------------------------------------------------------------
    def gep(self, b, ptr, i):
        return b.gep(ptr, [i], inbounds=True, source_etype=self.ft)

    def load(self, b, ptr, mask):
        fn = self.intrinsic("masked.load", self.vt, [PTR, I32, self.mt, self.vt])
        return b.call(fn, [ptr, self.align, mask, self.zero])

    def store(self, b, v, ptr, mask):
        fn = self.intrinsic("masked.store", ir.VoidType(), [self.vt, PTR, I32, self.mt])
        b.call(fn, [v, ptr, self.align, mask])

    def splat(self, b, s):
        v = b.insert_element(ir.Constant(self.vt, None), s, ir.Constant(I32, 0))
        return b.shuffle_vector(v, ir.Constant(self.vt, None),
                                ir.Constant(ir.VectorType(I32, self.vw), [0] * self.vw))

    def mask(self, b, n):
        """Lanes [0, n) on (n an i64, any sign)."""
        lanes = ir.Constant(ir.VectorType(I64, self.vw), list(range(self.vw)))
        nv = b.insert_element(ir.Constant(ir.VectorType(I64, self.vw), None), n,
                              ir.Constant(I32, 0))
        nv = b.shuffle_vector(nv, nv, ir.Constant(ir.VectorType(I32, self.vw), [0] * self.vw))
        return b.icmp_signed("<", lanes, nv)

    # ---- micro-kernel ------------------------------------------------------------------
    def micro(self, rows):
        """c[r*ldc + v*VW + j] = sum_k a[r*ars + k*acs] * b[k*brs + v*VW + j] for r < rows,
        the two vectors v masked by m0, m1. With rows > 1, A must be unit-stride along
        rows (ars == 1): the broadcasts then read one run at constant offsets (with a
        run-time row stride LLVM chains the row addresses, one add after another, and
        that chain, not the FMAs, set the pace)."""
        vw, vt = self.vw, self.vt
        fn, b = self.function(f"llgrad_gemm_micro{rows}_{self.sfx}",
                              [PTR, I64, I64, PTR, I64, PTR, I64, I64, self.mt, self.mt],
                              "a ars acs bp brs c ldc K m0 m1".split())
        a, ars, acs, bp, brs, c, ldc, K, m0, m1 = fn.args
        fma = self.intrinsic("fma", vt, [vt, vt, vt])
        rows_a = [self.gep(b, a, b.mul(ars, _c(r)) if rows == 1 else _c(r))
                  for r in range(rows)]
        with carried_range(b, K, [self.zero] * (2 * rows), "k") as (k, acc, out):
            brow = self.gep(b, bp, b.mul(k, brs))
            bv = [self.load(b, brow, m0), self.load(b, self.gep(b, brow, _c(vw)), m1)]
            koff = b.mul(k, acs)
            for r in range(rows):
                s = self.splat(b, b.load(self.gep(b, rows_a[r], koff), typ=self.ft))
                out += [b.call(fma, [s, bv[v], acc[2 * r + v]]) for v in range(2)]
        for r in range(rows):
            crow = self.gep(b, c, b.mul(ldc, _c(r)))
            self.store(b, out[2 * r], crow, m0)
            self.store(b, out[2 * r + 1], self.gep(b, crow, _c(vw)), m1)
        b.ret_void()
        return fn

    # ---- packing a transposed B --------------------------------------------------------
    def transpose(self, b, vs):
        """n row vectors of n lanes -> the n rows of their transpose: log2(n) rounds of
        interleaving row i with row i + n/2 (the perfect shuffle)."""
        n = len(vs)
        h = n // 2
        it = ir.VectorType(I32, n)
        lo = ir.Constant(it, [x for i in range(h) for x in (i, i + n)])
        hi = ir.Constant(it, [x for i in range(h, n) for x in (i, i + n)])
        for _ in range(n.bit_length() - 1):
            vs = [s for i in range(h) for s in (b.shuffle_vector(vs[i], vs[i + h], lo),
                                               b.shuffle_vector(vs[i], vs[i + h], hi))]
        return vs

    def pack(self):
        """dst[k*N + n] = src[n*lds + k] (n < N, k < K): B^T stored row-major as (N, K)
        with row stride lds, copied to a K x N row-major scratch. Exported: ops_matmul
        calls it too (transpose_function)."""
        name = transpose_name("float32" if self.ft == F32 else "float64")
        # 8 x 8 blocks even where vectors are wider: a 16 x 16 transpose is 64 shuffles,
        # which took LLVM ~70 ms to compile, for no measurable gain at these sizes
        vw = min(self.vw, 8)
        pt = ir.VectorType(self.ft, vw)
        fn, b = self.function(name, [PTR, I64, PTR, I64, I64],
                              "src lds dst N K".split())
        src, lds, dst, N, K = fn.args
        nf = b.mul(b.sdiv(N, _c(vw)), _c(vw))
        kf = b.mul(b.sdiv(K, _c(vw)), _c(vw))
        plain = loop_hints(self.module, vectorize_enable=0, unroll_disable=1)
        with for_range(b, 0, nf, vw, name="pn", hints=plain) as n0:
            with for_range(b, 0, kf, vw, name="pk", hints=plain) as k0:
                base = self.gep(b, src, b.add(b.mul(n0, lds), k0))
                rows = [b.load(self.gep(b, base, b.mul(lds, _c(r))), typ=pt, align=4)
                        for r in range(vw)]
                out = self.gep(b, dst, b.add(b.mul(k0, N), n0))
                for r, v in enumerate(self.transpose(b, rows)):
                    b.store(v, self.gep(b, out, b.mul(N, _c(r))), align=4)
        # edges, element by element: rows n >= nf (every k), then columns k >= kf
        for n_lo, n_hi, k_lo in ((nf, N, _c(0)), (_c(0), nf, kf)):
            with for_range(b, n_lo, n_hi, name="en", hints=plain) as n:
                with for_range(b, k_lo, K, name="ek", hints=plain) as k:
                    v = b.load(self.gep(b, src, b.add(b.mul(n, lds), k)), typ=self.ft)
                    b.store(v, self.gep(b, dst, b.add(b.mul(k, N), n)))
        b.ret_void()
        return fn

    # ---- the driver --------------------------------------------------------------------
    def driver(self, name):
        vw, mr = self.vw, self.mr
        big, one, pack = self.micro(mr), self.micro(1), self.pack()
        fn, b = self.function(name, _SIG, ARGS)
        M, N, K, a, ars, acs, bp, brs, bcs, c, ldc, a_scratch, b_scratch = fn.args
        # B unit-stride along N as it is; else (a transposed B, unit-stride along K) packed
        # into K x N. A unit-stride along M as it is (a transposed A); else (row-major)
        # packed into K x M when it has a full tile of rows.
        b_unit = b.icmp_signed("==", bcs, _c(1))
        with b.if_then(b.not_(b_unit)):
            b.call(pack, [bp, bcs, b_scratch, N, K])
        bsrc = b.select(b_unit, bp, b_scratch)
        bld = b.select(b_unit, brs, N)
        a_unit = b.or_(b.icmp_signed("==", ars, _c(1)), b.icmp_signed("<", M, _c(mr)))
        with b.if_then(b.not_(a_unit)):
            b.call(pack, [a, ars, a_scratch, M, K])
        a = b.select(a_unit, a, a_scratch)
        acs = b.select(a_unit, acs, M)
        ars = b.select(a_unit, ars, _c(1))
        mfull = b.mul(b.sdiv(M, _c(mr)), _c(mr))
        with for_range(b, 0, N, 2 * vw, name="j") as j0:
            left = b.sub(N, j0)
            m0, m1 = self.mask(b, left), self.mask(b, b.sub(left, _c(vw)))
            bcol = self.gep(b, bsrc, j0)
            with for_range(b, 0, mfull, mr, name="i") as i0:
                b.call(big, [self.gep(b, a, b.mul(i0, ars)), ars, acs, bcol, bld,
                             self.gep(b, c, b.add(b.mul(i0, ldc), j0)), ldc, K, m0, m1])
            with for_range(b, mfull, M, name="r") as i:
                b.call(one, [self.gep(b, a, b.mul(i, ars)), ars, acs, bcol, bld,
                             self.gep(b, c, b.add(b.mul(i, ldc), j0)), ldc, K, m0, m1])
        b.ret_void()
        return fn


_libraries = {}     # (dtype, kind) -> Compiled: a library's code in the current engine
_lock = threading.Lock()
_asked = threading.local()


@contextmanager
def libraries_asked():
    """A list of the (dtype, kind) this thread asks ensure_library for meanwhile: a plan kept
    on disk (codegen/prepared.py) asks for them again when it is loaded, as its
    preparation (which it skips) did."""
    outer = getattr(_asked, "libraries", None)
    _asked.libraries = asked = []
    try:
        yield asked
    finally:
        _asked.libraries = outer
        if outer is not None:
            outer.extend(asked)


def gemm_function(module, dtype):
    """module's declaration of the GEMM for dtype: void(M, N, K, a, ars, acs, b, brs, bcs,
    c, ldc, a_scratch, b_scratch); strides in elements; M, N, K >= 1; A unit-stride along M
    (ars == 1) or along K (acs == 1, then a_scratch holds K*M elements: scratch_sizes);
    B unit-stride along N (bcs == 1) or along K (brs == 1, then b_scratch holds K*N
    elements). The code itself lives in a library module compiled once per process (or
    loaded from the disk cache), whose symbol the kernel's object file is linked against
    when it is loaded: see ensure_library."""
    name = f"llgrad_gemm_{dtype}"
    fn = module.globals.get(name)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(ir.VoidType(), _SIG), name)
    return fn


def transpose_name(dtype):
    return f"llgrad_transpose_{dtype}"


def transpose_function(module, dtype):
    """module's declaration of the library's transposing copy for dtype:
    void(src, lds, dst, N, K): dst[k*N + n] = src[n*lds + k] for n < N, k < K (8 x 8 blocks
    transposed in registers). ensure_library(dtype, "transpose") makes it resolvable."""
    name = transpose_name(dtype)
    fn = module.globals.get(name)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR, I64, PTR, I64, I64]),
                         name)
    return fn


def ensure_library(dtype, kind="gemm"):
    """Make a library of dtype resolvable by kernels (call before a kernel that uses it is
    compiled or loaded from the disk cache): compiled once per engine, or loaded from the
    disk cache. kind "gemm": the GEMM (its packing inside it); "transpose": the transposing
    copy alone, all that products going to BLAS need (it compiles in ~40 ms, the GEMM's
    register-blocked kernels in ~100). Compiling them into every kernel's module instead
    cost ~80 ms per module."""
    asked = getattr(_asked, "libraries", None)
    if asked is not None:
        asked.append((dtype, kind))
    j = jit.jit()
    name = f"llgrad_gemm_{dtype}" if kind == "gemm" else transpose_name(dtype)
    with _lock:
        lib = _libraries.get((dtype, kind))
        if lib is not None and lib._jit is j:
            return
        ft = F32 if dtype == "float32" else F64
        vw = max(j.vector_bits // (32 if ft == F32 else 64), 2)
        mr = 8 if j.vector_bits >= 512 else 6    # 2*MR accumulators + 3 of 16 / 32 registers
        key = keys.key_for(f"small gemm library {name}", f"vw={vw};mr={mr}")
        lib = jit.lookup(key, name)
        if lib is None:
            mod = jit.new_module(name)
            gen = _Gen(mod, ft, vw, mr)
            gen.driver(name) if kind == "gemm" else gen.pack()
            mod.globals[name].linkage = ""       # external: what kernels link against
            lib = jit.compile_module(mod, [name], key=key)
        jit.add_symbol(name, lib.address(name))
        _libraries[(dtype, kind)] = lib


def _reset():
    """Forget the libraries (the next kernel that needs one builds or loads it again)."""
    with _lock:
        _libraries.clear()


def scratch_sizes(M, N, K, ars, bcs):
    """Elements of (a_scratch, b_scratch) a call with these sizes and strides needs (0:
    none, pass null). (A is packed only when M >= MR, which depends on the target: the
    size asked for covers every M > 1.)"""
    return (K * M if ars != 1 and M > 1 else 0), (K * N if bcs != 1 else 0)
