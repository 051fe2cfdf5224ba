"""Lowerings of convolution and its two backward products (llgrad/ir/ops_conv.py): im2col
into a scratch buffer, then one GEMM per image and group, as the NumPy implementations; or,
for small output maps (fewer than BATCH_BELOW positions) without groups, one GEMM over all
the images, their columns side by side (the gradient gathered to, the output scattered from,
an O x N*M scratch).

- convolution: per image, the windows are unfolded into cols (K x M, K = C/G*KH*KW rows,
  M = OH*OW columns), and out[n, g] (Og x M, already NCHW) = W[g] (Og x K) @ cols[g]; the
  bias is added after the product (the NumPy implementation folds it into its product as a
  row of ones: the same terms, summed in BLAS's order).
- convolution_backward_input: per image, dcols[g] = W[g]^T @ grad[n, g], then folded back
  (col2im: each (channel, kernel offset) row adds into a strided slice of the input plane).
- convolution_backward_weight: per image, cols as in the forward, dW[g] += grad[n, g] @
  cols[g]^T (the first image writes, the next ones accumulate); with a BLAS and K >= 4 Og,
  dW[g]^T += cols[g] @ grad[n, g]^T instead, transposed when the chunks are summed
  (OpenBLAS runs the K x Og product of the same terms 1.2-1.8x faster: measured).

Strided convolutions unfold and fold on phase planes of the padded input instead
(conv_phases.py: unit-stride runs where the direct loops below stride through short rows).
The unfold visits only the window positions inside the input (the valid output range of
each kernel offset is computed once per row, no test per element): positions in the padding
stay zero, because cols is zeroed once per call and the positions are the same for every
image. Its inner loop runs along an output row, unit stride for stride 1 (vectorised).
Operands a GEMM cannot read in place (a weight or gradient that is not contiguous) are
first copied to contiguous scratch. With a BLAS the products are cblas_?gemm calls; without,
llgrad's own GEMM (gemm.py)."""
import numpy as np
from llvmlite import ir

from ...ir.geometry import contiguous_strides
from ...ir.ops_conv import batches
from ...ir.graph import Value
from . import conv_phases as phases
from . import ops_conv_depthwise as depthwise
from . import ops_conv_direct as direct
from . import ops_conv_shifted as shifted
from .conv_common import MAX_CHUNKS, Gemm, geometry, valid_range, zero
from .loops import Access, for_range, loop_nest
from .parallel import parallel_range
from .scalar import I64
from .table import register

FLOATS = ("float32", "float64")
# (ir/ops_conv.batches: below BATCH_BELOW output positions an image, the images are one
# product of K x N*M columns: per image, a product that thin runs its BLAS far below its
# speed; at 8x8 and above the per-image products are as fast and need no gather)
BATCH_MAX_ELEMENTS = 1 << 23        # (the batched cols' scratch: 32 MiB of float32 at most)


def _check(node):
    tensors = [x for x in node.inputs if x is not None]
    if not all(isinstance(x, Value) for x in tensors):
        return "a Python-number operand"
    dt = node.outputs[0].type.dtype
    if dt not in FLOATS or any(x.type.dtype != dt for x in tensors):
        return "integer or mixed dtypes (native convolution is float32/float64)"
    return None


def _contiguous(plan, group, v, shape):
    """(Access of v as a contiguous array of shape, copy or None): a value whose layout is
    not C-contiguous (ignoring size-1 dims) is copied to scratch first (see _copy_in)."""
    acc = plan.access(v, shape)
    want = contiguous_strides(shape)
    if all(n == 1 or s == w for n, s, w in zip(shape, acc.strides, want)):
        return acc.with_strides(want), None
    tmp = plan.temp(group, v.type.dtype, int(np.prod(shape)))
    dst = Access(tmp, v.type.dtype, 0, want)
    return dst, (acc, dst, shape)


def _copy_in(fg, copy):
    if copy is not None:
        src, dst, shape = copy
        with loop_nest(fg.b, shape, name="cp") as idx:
            fg.store(fg.load(src, idx), dst, idx)


def _each_window_row(fg, geo):
    """Loops over (channel, kernel row, kernel column) and the valid output positions of
    that kernel offset: yields (c, i, j, oh, ow, ih, iw) in the innermost body."""
    b = fg.b
    c = lambda v: ir.Constant(I64, v)                                   # noqa: E731
    with for_range(b, 0, geo.c, name="ch") as ch:
        with for_range(b, 0, geo.kh, name="ki") as i:
            lo_h, hi_h = valid_range(b, i, geo.dh, geo.ph, geo.sh, geo.h, geo.oh)
            with for_range(b, 0, geo.kw, name="kj") as j:
                lo_w, hi_w = valid_range(b, j, geo.dw, geo.pw, geo.sw, geo.w, geo.ow)
                with for_range(b, lo_h, hi_h, name="oh") as oh:
                    ih = b.sub(b.add(b.mul(oh, c(geo.sh)), b.mul(i, c(geo.dh))), c(geo.ph))
                    with for_range(b, lo_w, hi_w, name="ow") as ow:
                        iw = b.sub(b.add(b.mul(ow, c(geo.sw)), b.mul(j, c(geo.dw))),
                                   c(geo.pw))
                        yield ch, i, j, oh, ow, ih, iw


def _cols_access(buf, dt, geo):
    """A chunk's cols as (chunk, channel, kernel row, kernel column, oh, ow), rows of M."""
    per = geo.g * geo.k * geo.m
    return Access(buf, dt, 0, (per, geo.kh * geo.kw * geo.m, geo.kw * geo.m, geo.m, geo.ow, 1))


def _unfold(fg, geo, x, cols, n, tid):
    for ch, i, j, oh, ow, ih, iw in _each_window_row(fg, geo):
        fg.store(fg.load(x, [n, ch, ih, iw]), cols, [tid, ch, i, j, oh, ow])


def _fold(fg, geo, dcols, dx, n, tid):
    sg = fg.sg
    for ch, i, j, oh, ow, ih, iw in _each_window_row(fg, geo):
        idx = [n, ch, ih, iw]
        fg.store(sg.add(fg.load(dx, idx), fg.load(dcols, [tid, ch, i, j, oh, ow])), dx, idx)


def _padded(geo):
    return bool(geo.ph or geo.pw)


# ---- the three ops ---------------------------------------------------------------------------
# Images are split among the threads in at most MAX_CHUNKS chunks (parallel.parallel_range),
# each with scratch of its own (its cols; the weight gradient's partial sum, added up in
# chunk order after the join: deterministic for a thread count). A chunk's products go
# through the BLAS shim, which runs them on the caller alone while the other CPUs are busy
# with chunks. Without a BLAS (llgrad's GEMM has scratch of its own) the images run in one
# chunk. Stride-1 convolutions with enough channels skip the unfold: ops_conv_shifted.py;
# depthwise ones are direct loops: ops_conv_depthwise.py; those with few input channels (a
# first layer: forward and weight gradient) direct register-blocked kernels:
# ops_conv_direct.py.


def _prepare(plan, group):
    node, st = group.root, group.state
    geo = geometry(node)
    dt = node.outputs[0].type.dtype
    st.update(geo=geo, dt=dt, copies=[])
    if depthwise.applies(node, geo):
        st["depthwise"] = True
        depthwise.prepare(plan, group, st)
        return
    if shifted.applies(geo):
        st["shifted"] = True
        shifted.prepare(plan, group, st)
        return
    u, v = node.inputs[:2]
    if node.op == "convolution":
        st["x"] = plan.access(u, u.type.shape)
        st["w"], cp = _contiguous(plan, group, v, v.type.shape)
        st["bias"] = plan.access(node.inputs[2], (geo.o,)) \
            if isinstance(node.inputs[2], Value) else None
        st["gemm"] = Gemm(plan, group, dt, geo.og, geo.m, geo.k, (geo.k, 1), (geo.m, 1))
    elif node.op == "convolution_backward_input":
        st["grad"], cp0 = _contiguous(plan, group, u, u.type.shape)
        st["w"], cp = _contiguous(plan, group, v, v.type.shape)
        st["copies"].append(cp0)
        st["gemm"] = Gemm(plan, group, dt, geo.k, geo.m, geo.og, (1, geo.k), (geo.m, 1))
    else:
        st["grad"], cp = _contiguous(plan, group, u, u.type.shape)
        st["x"] = plan.access(v, v.type.shape)
        st["gemm"] = Gemm(plan, group, dt, geo.og, geo.k, geo.m, (geo.m, 1), (1, geo.m),
                           accumulate=True)
        if st["gemm"].blas is not None and geo.k >= 4 * geo.og:
            st["transposed"] = True     # (dW^T = cols @ grad^T: the BLAS path alone)
            st["gemm"] = Gemm(plan, group, dt, geo.k, geo.og, geo.m, (geo.m, 1), (1, geo.m))
    st["copies"].append(cp)
    if direct.applies(node, geo, dt) and not _batches(geo, st["gemm"]):
        st["direct"] = True     # (few input channels: ops_conv_direct.py)
        direct.prepare(plan, group, st)
        return
    if _batches(geo, st["gemm"]):
        _prepare_batched(plan, group, st)
        return
    chunks = min(MAX_CHUNKS, max(geo.n, 1)) if st["gemm"].blas is not None else 1
    st["grain"] = -(-max(geo.n, 1) // chunks)
    st["chunks"] = -(-max(geo.n, 1) // st["grain"])
    st["cols"] = plan.temp(group, dt, st["chunks"] * geo.g * geo.k * geo.m)
    if node.op == "convolution_backward_weight":
        st["partial"] = plan.temp(group, dt, st["chunks"] * geo.o * geo.k)
    _prepare_phases(plan, group, st, st["chunks"])


def _prepare_phases(plan, group, st, chunks):
    """A strided convolution unfolds or folds on phase planes (conv_phases.py): their
    scratch, a chunk's each."""
    if phases.applies(st["geo"], group.root.op):
        st["phases"] = plan.temp(group, st["dt"], chunks * phases.numel(st["geo"]))


def _zero_cols(fg, st, chunks, numel):
    """Once a call, before the unfolds: the zeros of the padding (in cols, numel elements,
    or in the phase planes, from which the unfold writes every column)."""
    geo, dt = st["geo"], st["dt"]
    if st.get("phases") is not None:
        phases.zero(fg, geo, st["phases"], dt, chunks)
    elif _padded(geo):
        zero(fg, st["cols"], dt, numel)


def _unfold_into(fg, st, cols, n, tid, chunk):
    if st.get("phases") is not None:
        phases.unfold(fg, st["geo"], st["x"], cols, n, tid, st["phases"], chunk)
    else:
        _unfold(fg, st["geo"], st["x"], cols, n, tid)


def _fold_into(fg, st, dcols, dx, n, tid, chunk):
    """col2im of dcols[tid] into dx[n]: on phase planes (chunk's) where _prepare_phases
    made them, else directly (dx[n] zeroed first)."""
    geo = st["geo"]
    if st.get("phases") is not None:
        phases.fold(fg, geo, dcols, dx, n, tid, st["phases"], chunk)
        return
    plane = geo.c * geo.h * geo.w
    with for_range(fg.b, 0, plane, name="z") as e:
        fg.store(fg.sg.const(0, st["dt"]), dx.with_strides((plane, 1)), [n, e])
    _fold(fg, geo, dcols, dx, n, tid)


def _batches(geo, gemm):
    return gemm.blas is not None and batches(geo.g, geo.o, geo.m) and geo.n > 1 and \
        geo.k * geo.n * geo.m <= BATCH_MAX_ELEMENTS


def _prepare_batched(plan, group, st):
    """One product over all the images: cols is K x N*M (image n's columns from n*M), and
    the products' operand or result in NCHW order is gathered to (or scattered from) an
    O x N*M scratch, `mat`."""
    node, geo, dt = group.root, st["geo"], st["dt"]
    nm = geo.n * geo.m
    st["batched"] = True
    if node.op == "convolution":
        st["gemm"] = Gemm(plan, group, dt, geo.o, nm, geo.k, (geo.k, 1), (nm, 1))
    elif node.op == "convolution_backward_input":
        st["gemm"] = Gemm(plan, group, dt, geo.k, nm, geo.o, (1, geo.k), (nm, 1))
    elif st.get("transposed"):
        st["gemm"] = Gemm(plan, group, dt, geo.k, geo.o, nm, (nm, 1), (1, nm))
        st["wt"] = plan.temp(group, dt, geo.k * geo.o)
    else:
        st["gemm"] = Gemm(plan, group, dt, geo.o, geo.k, nm, (nm, 1), (1, nm))
    st["cols"] = plan.temp(group, dt, geo.k * nm)
    st["mat"] = plan.temp(group, dt, geo.o * nm)
    # (the product is one BLAS call; the unfolds and folds around it are split among the
    # threads by images, each chunk with phase planes of its own)
    st["chunks"] = min(MAX_CHUNKS, geo.n)
    st["grain"] = -(-geo.n // st["chunks"])
    st["chunks"] = -(-geo.n // st["grain"])
    _prepare_phases(plan, group, st, st["chunks"])


def _each_image(fg, st, emit):
    """emit(g, n, chunk) for every image n, the images split among the threads."""
    geo = st["geo"]

    def body(g, lo, hi, tid):
        with for_range(g.b, lo, hi, name="img") as n:
            emit(g, n, tid)
    parallel_range(fg, geo.n, body, work_per_iter=max(1, geo.k * geo.m), grain=st["grain"])


def _emit_batched(plan, group, fg, out):
    node, st = group.root, group.state
    geo, dt, b = st["geo"], st["dt"], fg.b
    c = lambda v: ir.Constant(I64, v)                                   # noqa: E731
    nm = geo.n * geo.m
    cols = Access(st["cols"], dt, 0, (geo.m, geo.kh * geo.kw * nm, geo.kw * nm, nm, geo.ow, 1))
    colmat = Access(st["cols"], dt, 0, (nm, 1))
    mat = Access(st["mat"], dt, 0, (geo.m, nm, 1))          # [n, o, m] of the O x N*M matrix
    nchw = (geo.o * geo.m, geo.m, 1)
    if node.op != "convolution_backward_input":
        _zero_cols(fg, st, st["chunks"], geo.k * nm)
        # (n: the column block of image n)
        _each_image(fg, st, lambda g, n, tid: _unfold_into(g, st, cols, n, n, tid))
    if node.op != "convolution":                        # the gradient, O x N*M
        grad = st["grad"].with_strides(nchw)
        with loop_nest(b, (geo.n, geo.o, geo.m), name="gather") as (n, o, m):
            fg.store(fg.load(grad, [n, o, m]), mat, [n, o, m])
    gemm, origin = st["gemm"], [c(0), c(0)]
    if node.op == "convolution":
        gemm.call(fg, fg.address(st["w"].with_strides((geo.k, 1)), origin),
                  fg.address(colmat, origin), fg.address(mat, [c(0)] * 3), nm, False)
        outmat = out.with_strides(nchw)
        with loop_nest(b, (geo.n, geo.o, geo.m), name="scatter") as (n, o, m):
            v = fg.load(mat, [n, o, m])
            if st["bias"] is not None:
                v = fg.sg.add(v, fg.load(st["bias"], [o]))
            fg.store(v, outmat, [n, o, m])
    elif node.op == "convolution_backward_input":
        gemm.call(fg, fg.address(st["w"].with_strides((geo.k, 1)), origin),
                  fg.address(mat, [c(0)] * 3), fg.address(colmat, origin), nm, False)
        _each_image(fg, st, lambda g, n, tid: _fold_into(g, st, cols, out, n, n, tid))
    elif st.get("transposed"):
        wt = Access(st["wt"], dt, 0, (1, geo.o))                       # [o, k] of K x O
        gemm.call(fg, fg.address(colmat, origin), fg.address(mat, [c(0)] * 3),
                  fg.address(wt, origin), geo.o, False)
        with loop_nest(b, (geo.o, geo.k), name="dwt") as (o, kk):
            fg.store(fg.load(wt, [o, kk]), out.with_strides((geo.k, 1)), [o, kk])
    else:
        gemm.call(fg, fg.address(mat, [c(0)] * 3), fg.address(colmat, origin),
                  fg.address(out.with_strides((geo.k, 1)), origin), geo.k, False)


def _over_images(fg, st, body):
    """body(g, lo, hi, tid) over the images, split among the threads."""
    geo = st["geo"]
    flops = 2 * geo.o * geo.k * geo.m           # per image (each op: one such product)
    parallel_range(fg, geo.n, body, work_per_iter=max(1, flops // 8), grain=st["grain"])


def _emit(plan, group, fg):
    node, st = group.root, group.state
    geo, dt = st["geo"], st["dt"]
    out = plan.out_access(group)
    if int(np.prod(node.outputs[0].type.shape)) == 0:
        return
    if st.get("depthwise"):
        depthwise.emit(plan, group, fg)
        return
    if st.get("shifted"):
        shifted.emit(plan, group, fg)
        return
    c = lambda v: ir.Constant(I64, v)                                   # noqa: E731
    for cp in st["copies"]:
        _copy_in(fg, cp)
    if st.get("direct"):
        direct.emit(plan, group, fg)
        return
    if st.get("batched"):
        _emit_batched(plan, group, fg, out)
        return
    cols = _cols_access(st["cols"], dt, geo)
    colmat = Access(st["cols"], dt, 0, (geo.g * geo.k * geo.m, geo.m, 1))
    gemm = st["gemm"]
    if node.op != "convolution_backward_input":
        _zero_cols(fg, st, st["chunks"], st["chunks"] * geo.g * geo.k * geo.m)
    if node.op == "convolution":
        wmat = st["w"].with_strides((geo.k, 1))
        outmat = out.with_strides((geo.o * geo.m, geo.m, 1))

        def body(g, lo, hi, tid):
            b = g.b
            with for_range(b, lo, hi, name="img") as n:
                _unfold_into(g, st, cols, n, tid, tid)
                with for_range(b, 0, geo.g, name="grp") as gi:
                    go = b.mul(gi, c(geo.og))
                    gemm.call(g, g.address(wmat, [go, c(0)]),
                              g.address(colmat, [tid, b.mul(gi, c(geo.k)), c(0)]),
                              g.address(outmat, [n, go, c(0)]), geo.m, False)
                if st["bias"] is not None:
                    with loop_nest(b, (geo.o, geo.m), name="bias") as (o, m):
                        g.store(g.sg.add(g.load(outmat, [n, o, m]), g.load(st["bias"], [o])),
                                outmat, [n, o, m])
    elif node.op == "convolution_backward_input":
        wmat = st["w"].with_strides((geo.k, 1))
        gmat = st["grad"].with_strides((geo.o * geo.m, geo.m, 1))

        def body(g, lo, hi, tid):
            b = g.b
            with for_range(b, lo, hi, name="img") as n:
                with for_range(b, 0, geo.g, name="grp") as gi:
                    go = b.mul(gi, c(geo.og))
                    gemm.call(g, g.address(wmat, [go, c(0)]),
                              g.address(gmat, [n, go, c(0)]),
                              g.address(colmat, [tid, b.mul(gi, c(geo.k)), c(0)]), geo.m,
                              False)
                _fold_into(g, st, cols, out, n, tid, tid)
    else:
        gmat = st["grad"].with_strides((geo.o * geo.m, geo.m, 1))
        tr = bool(st.get("transposed"))     # (a chunk's partial: [g, k, og], else [o, k])
        part = Access(st["partial"], dt, 0, (geo.o * geo.k, geo.og * geo.k, 1, geo.og)
                      if tr else (geo.o * geo.k, geo.og * geo.k, geo.k, 1))   # [t, g, o, k]
        zero(fg, st["partial"], dt, st["chunks"] * geo.o * geo.k)

        def body(g, lo, hi, tid):
            b = g.b
            with for_range(b, lo, hi, name="img") as n:
                _unfold_into(g, st, cols, n, tid, tid)
                with for_range(b, 0, geo.g, name="grp") as gi:
                    a = g.address(gmat, [n, b.mul(gi, c(geo.og)), c(0)])
                    cm = g.address(colmat, [tid, b.mul(gi, c(geo.k)), c(0)])
                    pc = g.address(part, [tid, gi, c(0), c(0)])
                    gemm.call(g, *((cm, a, pc, geo.og) if tr else (a, cm, pc, geo.k)), True)
    _over_images(fg, st, body)
    if node.op == "convolution_backward_weight":     # the chunks' sums, in chunk order
        dw = out.with_strides((geo.og * geo.k, geo.k, 1))
        b = fg.b
        with loop_nest(b, (geo.g, geo.og, geo.k), name="dw") as e:
            # (a loop, not unrolled here: the code is the same for every chunk count, so
            # batch sizes share it, codegen/size_params.py; LLVM unrolls a constant one)
            fg.store(fg.load(part, [c(0), *e]), dw, e)
            with for_range(b, 1, st["chunks"], name="chunk") as t:
                fg.store(fg.sg.add(fg.load(dw, e), fg.load(part, [t, *e])), dw, e)


for _op in ("convolution", "convolution_backward_input", "convolution_backward_weight"):
    register(_op, "kernel", emit=_emit, prepare=_prepare, check=_check)
