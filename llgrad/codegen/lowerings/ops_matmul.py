"""mm, bmm, matmul, dot and mv (NumPy's matmul semantics: 1-D operands, broadcast batch
dims).

Each operand is a matrix per batch index: rows, cols, a row stride and a column stride in
its buffer. One whose layout BLAS can read (unit stride along one axis, a leading dimension
at least the other extent) is passed as is (a transposed view becomes CblasTrans); any other
(stepped, broadcast rows) is first copied into a contiguous temporary. With a BLAS, one
cblas_?gemm call per batch index (a small transposed B, as in x @ W.T or each of attention's
k^T, is first copied to row-major by gemm.py's transpose: OpenBLAS is up to 2x slower on it
as it is; a C whose rows alias in the caches goes through a padded scratch: gemm_c_stride);
for integer dtypes, generated i-k-j loops (the inner loop runs along rows of B and C, and
vectorises). A batch of small products (attention's) runs over the threads, each product
one unsplit BLAS call (_batch_split); a single product is split by the BLAS shim.

Without a BLAS, float products call llgrad's own register-blocked GEMM (gemm.py) instead of
generated loops. LLGRAD_SMALL_GEMM=n sends products of at most n multiply-adds per batch
index to it even where a BLAS exists (default 0: measured on this project's machine,
OpenBLAS was faster on every shape of bench W1 but one, by 10-50%). Few-row products of a
row-major weight shared by a loop's steps run on it on one thread (shared_weight_gemm.py)."""
import os
from dataclasses import dataclass

import numpy as np
from llvmlite import ir

from ...ir.graph import Value
from ...ir.geometry import contiguous_strides
from ..native import blas
from . import gemm as small, gemm_c_stride
from .loops import Access, for_range, loop_nest
from .parallel import OVERSPLIT, parallel_range
from .scalar import F32, F64, I32, I64, PTR
from . import shared_weight_gemm
from .shared_weight_gemm import prefer_own_gemm
from .table import register

ROW_MAJOR, NO_TRANS, TRANS = 101, 111, 112
PACK_LIMIT = 1 << 16        # elements of a transposed B copied to row-major (see _prepare)
STACK_PACK_LIMIT = 1 << 14  # elements, for each product of a batch: a stack slot (64 KiB)


@dataclass
class _Mat:
    acc: Access          # buffer, dtype, offset; strides = (*batch strides, rs, cs)
    rows: int
    cols: int
    trans: int = NO_TRANS
    ld: int = 0

    @property
    def rs(self):
        return self.acc.strides[-2]

    @property
    def cs(self):
        return self.acc.strides[-1]


def _blas_layout(m):
    """(trans, ld) for BLAS, or None when the layout needs a copy."""
    rows, cols, rs, cs = m.rows, m.cols, m.rs, m.cs
    if cols == 1 or cs == 1:
        ld = rs if rows > 1 else max(1, cols)
        if ld >= max(1, cols):
            return NO_TRANS, ld
    if rows == 1 or rs == 1:
        ld = cs if cols > 1 else max(1, rows)
        if ld >= max(1, rows):
            return TRANS, ld
    return None


def small_gemm_bound():
    """Products of at most this many multiply-adds use gemm.py (read at compile time)."""
    return int(os.environ.get("LLGRAD_SMALL_GEMM", 0))


def _small_layout(m):
    """(rs, cs) of an operand the small GEMM reads (packing it first if need be), or None:
    it needs unit stride along one axis."""
    rs, cs = m.rs, m.cs
    if m.cols == 1:
        cs = 1
    if m.rows == 1:
        rs = 1
    return (rs, cs) if cs == 1 or rs == 1 else None


def _check(node):
    a, b = node.inputs[:2]
    bad = _check_pair(a, b, node.outputs[0].type.dtype)
    if bad is None and (len(a.type.shape) == 0 or len(b.type.shape) == 0):
        return "0-d operand"
    return bad


def _operand(plan, v, batch, as_row):
    """The operand v as a matrix with strides over (*batch, rows, cols)."""
    t = v.type
    acc = plan.access(v, t.shape)
    if len(t.shape) == 1:
        n, s = t.shape[0], acc.strides[0]
        rows, cols, rs, cs = (1, n, 0, s) if as_row else (n, 1, s, 0)
        bstr = ()
    else:
        rows, cols = t.shape[-2:]
        rs, cs = acc.strides[-2:]
        bstr = acc.strides[:-2]
    own = t.shape[:-2] if len(t.shape) > 1 else ()
    lead = len(batch) - len(own)
    bs = [0] * lead + [0 if n == 1 else s for n, s in zip(own, bstr)]
    return _Mat(acc.with_strides(tuple(bs) + (rs, cs)), rows, cols)


def _fold_rows(A, batch):
    """A stack times one matrix (B the same at every batch index): the stack's rows as one
    matrix when they are evenly spaced, as NumPy's matmul and PyTorch fold them, so one
    product of all the rows runs in place of a thin product per batch index (a cross
    network's (512, 1, d) @ (d, d): 512 one-row products, each reading all of B). C is
    contiguous over (*batch, M, N) either way. The folded A, or None."""
    dims = [(n, s) for n, s in zip(batch + (A.rows,), A.acc.strides[:-1]) if n > 1]
    if any(s0 != s1 * n1 for (_, s0), (n1, s1) in zip(dims, dims[1:])):
        return None
    rs = dims[-1][1] if dims else A.rs
    return _Mat(A.acc.with_strides((rs, A.cs)), int(np.prod(batch)) * A.rows, A.cols)


def _prepare(plan, group):
    node = group.root
    _prepare_product(plan, group, *node.inputs[:2])


def _prepare_product(plan, group, a, b):
    node = group.root
    out_t = node.outputs[0].type
    batch_a = a.type.shape[:-2] if len(a.type.shape) > 1 else ()
    batch_b = b.type.shape[:-2] if len(b.type.shape) > 1 else ()
    batch = tuple(np.broadcast_shapes(batch_a, batch_b))
    A = _operand(plan, a, batch, as_row=True)
    B = _operand(plan, b, batch, as_row=False)
    out_st = plan.buffers[node.outputs[0]].strides     # (a block of a copy: copy_into.py)
    folded = _fold_rows(A, batch) if batch and out_st is None and \
        not any(B.acc.strides[:-2]) else None
    if folded is not None:
        A, batch = folded, ()
        B = _Mat(B.acc.with_strides(B.acc.strides[-2:]), B.rows, B.cols)
    M, K, N = A.rows, A.cols, B.cols
    cstr = contiguous_strides(batch + (M, N)) if out_st is None else tuple(out_st)
    C = _Mat(Access(plan.buffers[node.outputs[0]], out_t.dtype, 0, cstr), M, N)
    gemm = blas.gemm_symbols().get(out_t.dtype) if plan.options.get("blas", True) else None
    kind, blas_too = "loops", None
    if out_t.dtype in ("float32", "float64"):
        kind = "blas" if gemm else "small"
        if kind == "blas" and M * N * K <= plan.options.get("small_gemm", 0):
            kind = "small"
        if kind == "blas" and prefer_own_gemm(plan, b, M, N, K, batch, B) and \
                None not in (_small_layout(A), _blas_layout(A), _blas_layout(B)):
            # a weight shared by a loop's steps (shared_weight_gemm.py): gemm.py on one
            # thread, BLAS (split by its shim) on more, from the same operands
            kind, blas_too = "small", (_blas_layout(A), _blas_layout(B))
    copies = []
    if kind != "loops":
        for m in (A, B):
            lay = _blas_layout(m) if kind == "blas" else _small_layout(m)
            if lay is None:
                own = [n if s else 1 for n, s in zip(batch, m.acc.strides[:-2])]
                shape = tuple(own) + (m.rows, m.cols)
                tmp = plan.temp(group, m.acc.dt, int(np.prod(shape)))
                cs = contiguous_strides(shape)
                dst = Access(tmp, m.acc.dt, 0, tuple(s if n > 1 else 0 for s, n in
                                                     zip(cs[:-2], own)) + cs[-2:])
                copies.append((m.acc, dst, shape, own))
                m.acc = dst
                lay = (NO_TRANS, max(1, m.cols)) if kind == "blas" else (m.cols, 1)
            if kind == "blas":
                m.trans, m.ld = lay
            else:
                m.acc = m.acc.with_strides(m.acc.strides[:-2] + lay)
    # OpenBLAS runs small products whose B is a transposed view (x @ W.T) up to 2x slower
    # than with B row-major (measured: 32x128x128, 33 vs 17 us); a transposing copy of B
    # (8 x 8 blocks in registers, 5-8 us for 128 x 128 here) pays for itself: W1's
    # value_and_grad ran 10-12% faster with it in an interleaved A/B. Kept to operands
    # that fit in L2, so a big product does not gain a big temporary.
    pack_b, pack_each = None, False
    if kind == "blas" and B.trans == TRANS and M > 1:
        if not batch and K * N <= PACK_LIMIT:
            small.ensure_library(out_t.dtype, "transpose")
            pack_b = plan.temp(group, out_t.dtype, K * N)
        elif batch and K * N <= STACK_PACK_LIMIT:
            # attention's q @ k^T: each product's B copied on the stack of the thread that
            # runs it (the batch may be divided among threads), 64 x 32 x 64: 98 -> 55 us
            small.ensure_library(out_t.dtype, "transpose")
            pack_each = True
    scratch = [None, None]
    if kind == "small":
        small.ensure_library(out_t.dtype)
        for k, n in enumerate(small.scratch_sizes(M, N, K, A.rs, B.cs)):
            if n:
                scratch[k] = plan.temp(group, out_t.dtype, n)
    c_pad = gemm_c_stride.prepare(plan, group, C, M, N, K, np.dtype(out_t.dtype).itemsize) \
        if kind == "blas" and not batch and out_st is None else None
    group.state.update(A=A, B=B, C=C, M=M, N=N, K=K, batch=batch, gemm=gemm, copies=copies,
                       kind=kind, scratch=scratch, pack_b=pack_b, pack_each=pack_each, c_pad=c_pad,
                       blas_too=blas_too, choice=None if blas_too is None else "shared weight")


def blas_gemm_function(module, sym, bits, dt, serial=False):
    """The declaration of BLAS's cblas_?gemm `sym` (int_bits `bits`) in module; serial: its
    entry that never splits the product (for a call inside a chunk of a parallel loop)."""
    name = blas.SERIAL + sym if serial else sym
    fn = module.globals.get(name)
    if fn is None:
        it = I64 if bits == 64 else I32
        ft = F32 if dt == "float32" else F64
        fnty = ir.FunctionType(ir.VoidType(), [I32, I32, I32, it, it, it, ft, PTR, it, PTR, it,
                                               ft, PTR, it])
        fn = ir.Function(module, fnty, name=name)
    return fn


def _batch_split(M, N, K, batch):
    """Whether a batched BLAS product runs its batch over the threads, each product one
    unsplit call: when the shim would not split the products anyway (attention's 64 x 64
    products), or the batch has chunks enough for two threads; each product's arithmetic is
    then the same for every thread count."""
    nb = int(np.prod(batch))
    return nb > 1 and (M * N * K < 2 * blas.CHUNK_WORK or nb >= 2 * OVERSPLIT)


def _packed(b, module, dt, B, ptrs, slot, N, K):
    """(trans, ld) of B for the call, after copying B^T (N x K, row stride ld) into slot as
    K x N row-major where a slot is given (ptrs[1] then points at it)."""
    if slot is None:
        return B.trans, B.ld
    b.call(small.transpose_function(module, dt),
           [ptrs[1], ir.Constant(I64, B.ld), slot, ir.Constant(I64, N), ir.Constant(I64, K)])
    ptrs[1] = slot
    return NO_TRANS, N


def _unflatten(b, f, extents):
    """The index over extents (outermost first) of the flat (row-major) index f."""
    idx, inner = [], 1
    for n in reversed(extents):
        q = b.udiv(f, ir.Constant(I64, inner)) if inner > 1 else f
        idx.append(b.urem(q, ir.Constant(I64, n)) if n > 1 else ir.Constant(I64, 0))
        inner *= n
    return idx[::-1]


def _emit(plan, group, fg):
    st = group.state
    A, B, C, M, N, K, batch = (st[k] for k in "A B C M N K batch".split())
    b, sg = fg.b, fg.sg
    dt = C.acc.dt
    if M * N * int(np.prod(batch)) == 0:
        return
    for src, dst, shape, own in st["copies"]:
        # src strides are over (*batch, rows, cols); copy the operand's own extent
        with loop_nest(b, shape, name="cp") as idx:
            fg.store(fg.load(src, idx), dst, idx)
    if K == 0:
        numel = M * N * int(np.prod(batch))
        with for_range(b, 0, numel) as i:
            fg.store(sg.const(0, dt), Access(C.acc.buf, dt, 0, (1,)), [i])
        return
    if st["kind"] == "small":
        fn = small.gemm_function(fg.module, dt)
        zeros = [ir.Constant(I64, 0)] * 2
        scratch = [fg.ptrs[t] if t is not None else ir.Constant(PTR, None)
                   for t in st["scratch"]]
        c = lambda v: ir.Constant(I64, v)                               # noqa: E731
        with loop_nest(b, batch, name="bt") as bidx:
            pa, pb, pc = (fg.address(m.acc, list(bidx) + zeros) for m in (A, B, C))
            args = [c(M), c(N), c(K), pa, c(A.rs), c(A.cs), pb, c(B.rs), c(B.cs), pc, c(C.rs),
                    *scratch]
            if st["blas_too"] is None:
                b.call(fn, args)
            else:
                (ta, lda), (tb, ldb) = st["blas_too"]
                blas = blas_gemm_function(fg.module, *st["gemm"], dt)
                shared_weight_gemm.by_threads(b, lambda: b.call(fn, args), lambda: _blas_call(
                    b, blas, st["gemm"][1], dt, ta, tb, M, N, K, pa, lda, pb, ldb, pc, C.rs))
        return
    if st["kind"] == "blas":
        sym, bits = st["gemm"]
        fn = blas_gemm_function(fg.module, sym, bits, dt)
        it = I64 if bits == 64 else I32
        ft = F32 if dt == "float32" else F64
        zeros = [ir.Constant(I64, 0)] * 2
        c = lambda v, t=it: ir.Constant(t, v)                           # noqa: E731
        if _batch_split(M, N, K, batch):        # the batch over the threads
            serial = blas_gemm_function(fg.module, sym, bits, dt, serial=True)

            def body(g, lo, hi, tid):
                slot = g.alloca(ft, count=K * N) if st["pack_each"] else None
                with for_range(g.b, lo, hi, name="bt") as f:
                    bidx = _unflatten(g.b, f, batch)
                    ptrs = [g.address(m.acc, bidx + zeros) for m in (A, B, C)]
                    btrans, ldb = _packed(g.b, g.module, dt, B, ptrs, slot, N, K)
                    g.b.call(serial, [c(ROW_MAJOR, I32), c(A.trans, I32), c(btrans, I32),
                                      c(M), c(N), c(K), ir.Constant(ft, 1.0), ptrs[0],
                                      c(A.ld), ptrs[1], c(ldb), ir.Constant(ft, 0.0),
                                      ptrs[2], c(C.rs)])
            parallel_range(fg, int(np.prod(batch)), body, work_per_iter=max(1, M * N * K // 8))
            return
        slot = fg.ptrs[st["pack_b"]] if st["pack_b"] is not None else \
            fg.alloca(ft, count=K * N) if st["pack_each"] else None
        with loop_nest(b, batch, name="bt") as bidx:
            ptrs = [fg.address(m.acc, list(bidx) + zeros) for m in (A, B, C)]
            btrans, ldb = _packed(b, fg.module, dt, B, ptrs, slot, N, K)
            pc, ldc = (fg.ptrs[st["c_pad"][0]], st["c_pad"][1]) if st["c_pad"] else (ptrs[2], C.rs)
            _blas_call(b, fn, bits, dt, A.trans, btrans, M, N, K, ptrs[0], A.ld, ptrs[1], ldb,
                       pc, ldc)
        if st["c_pad"]:
            gemm_c_stride.copy_back(fg, st["c_pad"], C, M, N)
        return
    # generated loops: C[i, :] = sum_k A[i, k] * B[k, :]
    with loop_nest(b, batch, name="bt") as bidx:
        bidx = list(bidx)
        with for_range(b, 0, M, name="i") as i:
            with for_range(b, 0, N, name="j") as j:
                fg.store(sg.const(0, dt), C.acc, bidx + [i, j])
            with for_range(b, 0, K, name="k") as k:
                aik = fg.load(A.acc, bidx + [i, k])
                with for_range(b, 0, N, name="j") as j:
                    cur = fg.load(C.acc, bidx + [i, j])
                    fg.store(sg.add(cur, sg.mul(aik, fg.load(B.acc, bidx + [k, j]))),
                             C.acc, bidx + [i, j])


def _blas_call(b, fn, bits, dt, ta, tb, M, N, K, pa, lda, pb, ldb, pc, ldc):
    """C = A @ B through cblas_?gemm fn (bits: its integers' width), C row-major M x N."""
    c = lambda v, t=I64 if bits == 64 else I32: ir.Constant(t, v)      # noqa: E731
    ft = F32 if dt == "float32" else F64
    b.call(fn, [c(ROW_MAJOR, I32), c(ta, I32), c(tb, I32), c(M), c(N), c(K),
                ir.Constant(ft, 1.0), pa, c(lda), pb, c(ldb), ir.Constant(ft, 0.0), pc, c(ldc)])


def _addmm_check(node):
    bias, a, b = node.inputs[:3]
    dt = node.outputs[0].type.dtype
    if not isinstance(bias, Value) or bias.type.dtype != dt:
        return "the added input must be a tensor of the result's dtype"
    if dt not in ("float32", "float64") and \
            any(isinstance(node.attrs.get(k, 1), float) for k in ("beta", "alpha")):
        return "a float beta or alpha on integers"
    return _check_pair(a, b, dt)


def _check_pair(a, b, dt):
    if not (isinstance(a, Value) and isinstance(b, Value)):
        return "operands must be tensors"
    if a.type.dtype != dt or b.type.dtype != dt:
        return "mixed dtypes"
    if dt == "bool":
        return "bool operands"
    return None


def _addmm_prepare(plan, group):
    node = group.root
    bias, a, b = node.inputs[:3]
    _prepare_product(plan, group, a, b)
    st = group.state
    st["bias"] = plan.access(bias, (st["M"], st["N"]))


def _addmm_emit(plan, group, fg):
    """The product into the result (as mm), then result = beta * self + alpha * result in one
    pass (the result never shares a buffer with an operand of its own group)."""
    _emit(plan, group, fg)
    st = group.state
    C, M, N, bias = st["C"], st["M"], st["N"], st["bias"]
    beta, alpha = group.root.attrs.get("beta", 1), group.root.attrs.get("alpha", 1)
    if M * N == 0 or (beta == 0 and alpha == 1):
        return
    b, sg = fg.b, fg.sg
    dt = C.acc.dt
    with loop_nest(b, (M, N), name="am") as idx:
        idx = list(idx)
        v = fg.load(C.acc, idx)
        if alpha != 1:
            v = sg.mul(v, sg.const(alpha, dt))
        if beta != 0:
            x = fg.load(bias, idx)
            v = sg.add(v, x if beta == 1 else sg.mul(x, sg.const(beta, dt)))
        fg.store(v, C.acc, idx)


register("addmm", "kernel", emit=_addmm_emit, prepare=_addmm_prepare, check=_addmm_check)

# dot (1-D . 1-D) and mv (2-D @ 1-D) are matmuls of those ranks (a 1 x K row times a K x 1
# column, an M x K matrix times a column): the same code, BLAS included
for _op in ("mm", "bmm", "matmul", "dot", "mv"):
    register(_op, "kernel", emit=_emit, prepare=_prepare, check=_check)

