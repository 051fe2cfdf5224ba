"""What the convolution lowerings share (ops_conv.py's im2col path, ops_conv_shifted.py's
shifted products): the sizes of one convolution and the GEMM call (a BLAS's cblas_?gemm, or
llgrad's own GEMM where there is no BLAS)."""
from llvmlite import ir

from ..native import blas
from . import gemm as small
from .loops import Access, for_range, loop_nest
from .ops_matmul import NO_TRANS, ROW_MAJOR, TRANS, blas_gemm_function
from .scalar import F32, I32, I64, PTR

MAX_CHUNKS = 8      # scratch copies at most: images are split among the threads in chunks


class Geometry:
    """The sizes of one convolution (from the forward's input and weight shapes)."""

    def __init__(self, xshape, wshape, attrs):
        self.n, self.c, self.h, self.w = xshape
        self.o, self.cg, self.kh, self.kw = wshape
        self.sh, self.sw = attrs["stride"]
        self.ph, self.pw = attrs["padding"]
        self.dh, self.dw = attrs["dilation"]
        self.g = attrs["groups"]
        self.oh = (self.h + 2 * self.ph - self.dh * (self.kh - 1) - 1) // self.sh + 1
        self.ow = (self.w + 2 * self.pw - self.dw * (self.kw - 1) - 1) // self.sw + 1
        self.og = self.o // self.g
        self.k = self.cg * self.kh * self.kw           # rows of cols per group
        self.m = self.oh * self.ow                     # columns of cols


def geometry(node):
    a, (u, v) = node.attrs, node.inputs[:2]
    if node.op == "convolution":
        return Geometry(u.type.shape, v.type.shape, a)
    if node.op == "convolution_backward_input":      # (grad, weight) -> input
        n, _, _, _ = u.type.shape
        xshape = (n, v.type.shape[1] * a["groups"]) + tuple(a["input_size"])
        return Geometry(xshape, v.type.shape, a)
    return Geometry(v.type.shape, a["weight_size"], a)   # (grad, input) -> weight


def valid_range(b, k, d, p, s, size, out):
    """[lo, hi) as i64s (lo <= hi, both in [0, out]): the output positions o whose input
    index o*s + k*d - p (kernel offset k, an i64) is in [0, size)."""
    c = lambda v: ir.Constant(I64, v)                                   # noqa: E731
    kd = b.mul(k, c(d))
    t, u = b.sub(c(p), kd), b.sub(c(size + p), kd)         # o*s >= t, o*s < u
    ceil = lambda v: b.sdiv(b.add(v, c(s - 1)), c(s))                   # noqa: E731
    clip = lambda v: b.select(b.icmp_signed("<", v, c(0)), c(0),       # noqa: E731
                              b.select(b.icmp_signed(">", v, c(out)), c(out), v))
    lo = clip(b.select(b.icmp_signed(">", t, c(0)), ceil(t), c(0)))
    hi = clip(b.select(b.icmp_signed(">", u, c(0)), ceil(u), c(0)))
    return lo, b.select(b.icmp_signed("<", hi, lo), lo, hi)


class Gemm:
    """One kind of product of the kernel, C (M x N, row stride ldc) = A @ B (+ C where
    accumulating), A and B given by row and column strides, one of which is 1."""

    def __init__(self, plan, group, dt, M, N, K, a_strides, b_strides, accumulate=False):
        self.dt, self.M, self.N, self.K = dt, M, N, K
        self.a_strides, self.b_strides = a_strides, b_strides
        found = blas.gemm_symbols().get(dt) if plan.options.get("blas", True) else None
        self.blas = found
        self.scratch = [None, None]
        self.acc = None
        if found is None:
            small.ensure_library(dt)
            for k, n in enumerate(small.scratch_sizes(M, N, K, a_strides[0], b_strides[1])):
                if n:
                    self.scratch[k] = plan.temp(group, dt, n)
            if accumulate:
                self.acc = plan.temp(group, dt, M * N)

    def call(self, fg, pa, pb, pc, ldc, accumulate):
        """Emit the product of the operands at pa, pb into pc; accumulate: an i1 (or bool)
        saying whether to add to C rather than overwrite it."""
        b = fg.b
        M, N, K = self.M, self.N, self.K
        if self.blas is not None:
            sym, bits = self.blas
            it = I64 if bits == 64 else I32
            ft = F32 if self.dt == "float32" else ir.DoubleType()
            c = lambda v, t=it: ir.Constant(t, v)                       # noqa: E731
            (ta, lda), (tb, ldb) = _trans(self.a_strides, K), _trans(self.b_strides, N)
            beta = accumulate if isinstance(accumulate, ir.Value) else \
                ir.Constant(ir.IntType(1), int(accumulate))
            beta = b.uitofp(beta, ft)
            b.call(blas_gemm_function(fg.module, sym, bits, self.dt),
                   [c(ROW_MAJOR, I32), c(ta, I32), c(tb, I32), c(M), c(N), c(K),
                    ir.Constant(ft, 1.0), pa, c(lda), pb, c(ldb), beta, pc, c(ldc)])
            return
        fn = small.gemm_function(fg.module, self.dt)
        scratch = [fg.ptrs[t] if t is not None else ir.Constant(PTR, None)
                   for t in self.scratch]
        c = lambda v: ir.Constant(I64, v)                               # noqa: E731
        dest, ld = (fg.ptrs[self.acc], N) if self.acc is not None else (pc, ldc)
        b.call(fn, [c(M), c(N), c(K), pa, c(self.a_strides[0]), c(self.a_strides[1]), pb,
                    c(self.b_strides[0]), c(self.b_strides[1]), dest, c(ld), *scratch])
        if self.acc is None:
            return
        # C = (accumulate ? C : 0) + acc
        keep = accumulate if isinstance(accumulate, ir.Value) else \
            ir.Constant(ir.IntType(1), int(accumulate))
        sg = fg.sg
        tmp = Access(self.acc, self.dt, 0, (N, 1))
        with loop_nest(b, (M, N), name="acc") as (i, j):
            pcij = b.gep(pc, [b.add(b.mul(i, c(ldc)), j)], inbounds=True,
                         source_etype=mem(self.dt))
            old = sg.load(pcij, self.dt)
            new = fg.load(tmp, [i, j])
            sg.store(sg.select(keep, sg.add(old, new), new), pcij)


def mem(dt):
    return F32 if dt == "float32" else ir.DoubleType()


def _trans(strides, cols):
    rs, cs = strides
    if cs == 1:
        return NO_TRANS, max(rs, cols, 1)
    return TRANS, cs


def zero(fg, buf, dt, numel):
    with for_range(fg.b, 0, numel, name="z") as i:
        fg.store(fg.sg.const(0, dt), Access(buf, dt, 0, (1,)), [i])
