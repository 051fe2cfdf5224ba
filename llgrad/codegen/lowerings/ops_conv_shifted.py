"""Stride-1 convolutions as shifted products, without an unfold (ops_conv.py's im2col
writes KH*KW copies of the input; this reads one padded copy KH*KW times).

Each image's input is copied once into a zero-padded plane per channel, rows Wp = W + 2*pw
apart, with (KW-1)*dw zeros of slack after the last row (P elements a channel). On that
grid, the kernel offset (i, j) is a constant shift off = i*dh*Wp + j*dw: the input columns
the offset reads for the OH output rows are the contiguous run xpad[c, off : off + OH*Wp],
a matrix (C x OH*Wp, row stride P) that BLAS reads in place. So the output is a sum of
KH*KW products over a "wide" grid of OH rows of Wp columns, of which the first OW of each
row are the output (the others read past a row's end: computed, never kept):

- convolution: wide (O x OH*Wp) = sum over (i, j) of W[:, :, i, j] (O x C) @ xpad shifted;
  then out[n, o, r, q] = wide[o, r*Wp + q] (+ bias) for q < OW.
- convolution_backward_input: gwide (O x OH*Wp) holds grad[n] with zeros in the columns
  past OW; dxpad[:, off : off + OH*Wp] += W[:, :, i, j]^T @ gwide for every (i, j); dx is
  dxpad's interior.
- convolution_backward_weight: dW[:, :, i, j] += gwide @ (xpad shifted)^T over the images;
  with a BLAS and C/G >= 2 O/G, dW[:, :, i, j]^T += (xpad shifted) @ gwide^T instead (the
  same terms: OpenBLAS runs the taller product 1.1-1.5x faster, measured), transposed when
  the chunks are summed.

The weights are repacked once per call, offset-major (KH*KW, O, C/G), so that each
offset's matrix has a unit stride. Groups run one after another, as in ops_conv.py.

The columns past OW multiply real input values (the start of the next row) by gwide's zeros
in the weight gradient, and weights by zeros in the input gradient: an infinite or NaN
value there would make 0 * inf = NaN where the unfold path adds no such term. So the weight
gradient checks each image's input and the input gradient checks the weights, and where a
value is not finite runs the products row by row over the OW valid columns only (exactly the
unfold path's terms)."""
from llvmlite import ir

from ...ir.graph import Value
from ..native import jit
from .conv_common import MAX_CHUNKS, Gemm, zero
from .loops import Access, for_range, loop_nest
from .parallel import parallel_range
from .scalar import I64

BOOL = ir.IntType(1)
MIN_CHANNELS = 8    # input channels per group: fewer make each shifted product too thin
MIN_COLUMNS = 200   # columns of each product (measured: 16x16 maps gain, 8x8 ones lose)
MAX_WIDE = 1.25     # wide columns per output column: past it the unfold's one product wins


def applies(geo):
    """Whether the convolution of geometry geo runs as shifted products: where each of
    them is a wide enough product (small maps with many channels are one large product
    of the unfold's, which a BLAS runs faster than KH*KW thin ones) and the wide grid is
    not mostly padding (DeepLab's ASPP: dilation and padding 36 on a 12x12 map make rows
    of 84 columns for 12 outputs, 7x the unfold's products: a step of it and its two
    gradients measured 23 ms against the unfold's 4.2; at dilation 8 on 32x32, 1.5 wide
    columns an output, 6.3 ms against 4.7)."""
    columns = geo.oh * -(-(geo.w + 2 * geo.pw) // geo.sw)
    return _thin_products_pay() and geo.kh * geo.kw > 1 and geo.cg >= MIN_CHANNELS and \
        geo.oh > 0 and geo.ow > 0 and MIN_COLUMNS <= columns <= MAX_WIDE * geo.oh * geo.ow


def _thin_products_pay():
    """Whether OpenBLAS runs products of a small K fast on this host: its AVX-512 kernels
    do, its AVX2 ones do not. On an AVX2 host (AMD znver3, 1 thread, a conv and both its
    gradients, batch 32, interleaved in one process) the unfold was ahead at every size
    tried: 16 -> 32 channels on 32x32 23.5 against 26.6 ms shifted, 64 -> 64 on 16x16 36.8
    against 45.4, 128 -> 128 138 against 148, 32 -> 32 even; at 2 threads by 11-22%."""
    return "+avx512f" in jit.jit().features.split(",")


def prepare(plan, group, st):
    """The scratch and the products of group's op (st: ops_conv's state, with geo and dt)."""
    node, geo, dt = group.root, st["geo"], st["dt"]
    hs = -(-(geo.h + 2 * geo.ph) // geo.sh)        # a phase plane's rows and columns
    ws = -(-(geo.w + 2 * geo.pw) // geo.sw)
    ps = hs * ws + (geo.kw - 1) * geo.dw // geo.sw  # (slack: the last row's shift reads on)
    p = geo.sh * geo.sw * ps
    nw = geo.oh * ws
    kk = geo.kh * geo.kw
    st.update(ws=ws, ps=ps, p=p, nw=nw, kk=kk)
    u, v = node.inputs[:2]
    if node.op == "convolution":
        st["gemm"] = Gemm(plan, group, dt, geo.og, nw, geo.cg, (geo.cg, 1), (p, 1),
                          accumulate=True)
        st["x"], st["w"] = plan.access(u, u.type.shape), plan.access(v, v.type.shape)
        st["bias"] = plan.access(node.inputs[2], (geo.o,)) \
            if isinstance(node.inputs[2], Value) else None
    elif node.op == "convolution_backward_input":
        st["gemm"] = Gemm(plan, group, dt, geo.cg, nw, geo.og, (geo.og, 1), (nw, 1),
                          accumulate=True)
        st["rows"] = Gemm(plan, group, dt, geo.cg, geo.ow, geo.og, (geo.og, 1), (nw, 1),
                          accumulate=True)
        st["grad"], st["w"] = plan.access(u, u.type.shape), plan.access(v, v.type.shape)
        st["finite"] = plan.temp(group, dt, 1)
    else:
        st["gemm"] = Gemm(plan, group, dt, geo.og, geo.cg, nw, (nw, 1), (1, p),
                          accumulate=True)
        st["rows"] = Gemm(plan, group, dt, geo.og, geo.cg, geo.ow, (nw, 1), (1, p),
                          accumulate=True)
        if st["gemm"].blas is not None and geo.cg >= 2 * geo.og:
            st["transposed"] = True
            st["gemm"] = Gemm(plan, group, dt, geo.cg, geo.og, nw, (p, 1), (1, nw))
            st["rows"] = Gemm(plan, group, dt, geo.cg, geo.og, geo.ow, (p, 1), (1, nw))
        st["grad"], st["x"] = plan.access(u, u.type.shape), plan.access(v, v.type.shape)
    chunks = min(MAX_CHUNKS, max(geo.n, 1)) if st["gemm"].blas is not None else 1
    st["grain"] = -(-max(geo.n, 1) // chunks)
    st["chunks"] = chunks = -(-max(geo.n, 1) // st["grain"])
    st["xpad"] = plan.temp(group, dt, chunks * geo.c * p)      # (dxpad in backward_input)
    if node.op != "convolution_backward_weight":
        st["packed"] = plan.temp(group, dt, kk * geo.o * geo.cg)
    st["wide"] = plan.temp(group, dt, chunks * geo.o * nw)      # (gwide in the backward)
    if node.op == "convolution_backward_weight":
        st["partial"] = plan.temp(group, dt, chunks * kk * geo.o * geo.cg)


def _not_finite(fg, value):
    """An i1: value is infinite or NaN (value - value is NaN exactly then)."""
    d = fg.b.fsub(value.v, value.v)
    return fg.b.fcmp_unordered("!=", d, ir.Constant(d.type, 0.0))


def _flag_loop(fg, flag, value):
    fg.b.store(fg.b.or_(fg.b.load(flag, typ=BOOL), _not_finite(fg, value)), flag)


def _pack_weights(fg, st, transposed):
    """The weights offset-major into `packed`: (KK, O, C/G) for the forward, (KK, C, O/G)
    for the input gradient (each group's W^T); with transposed, whether all are finite goes
    into `finite` (1 or 0)."""
    geo, dt = st["geo"], st["dt"]
    w, b = st["w"], fg.b
    sw = w.strides
    src = Access(w.buf, dt, w.offset, (geo.og * sw[0], sw[0], sw[1], sw[2], sw[3]))
    if transposed:
        dst = Access(st["packed"], dt, 0, (geo.cg * geo.og, 1, geo.og,
                                           geo.kw * geo.c * geo.og, geo.c * geo.og))
        flag = fg.alloca(BOOL)
        b.store(ir.Constant(BOOL, 0), flag)
    else:
        dst = Access(st["packed"], dt, 0, (geo.og * geo.cg, geo.cg, 1,
                                           geo.kw * geo.o * geo.cg, geo.o * geo.cg))
    with loop_nest(b, (geo.g, geo.og, geo.cg, geo.kh, geo.kw), name="wp") as idx:
        value = fg.load(src, idx)
        fg.store(value, dst, idx)
        if transposed:
            _flag_loop(fg, flag, value)
    if transposed:
        ok = b.select(b.load(flag, typ=BOOL), fg.sg.const(0, dt).v, fg.sg.const(1, dt).v)
        b.store(ok, fg.address(Access(st["finite"], dt, 0, (1,)), [ir.Constant(I64, 0)]))


def _phases(geo, st, image):
    """[(image's elements, their places in the padded planes, (C, rows, columns))] for each
    phase (row % stride, column % stride) of the padded grid: with stride 1 the one phase
    is the padded plane's interior; with stride s, phase (a, b) holds the positions s*u + a,
    s*v + b, so that each kernel offset reads one phase at a constant shift."""
    dt, p, ps, ws = st["dt"], st["p"], st["ps"], st["ws"]
    sn, sc, sh, sw = image.strides
    out = []
    for a in range(geo.sh):
        u0 = -(-(geo.ph - a) // geo.sh) if geo.ph > a else 0     # first row inside x
        u1 = (geo.h + geo.ph - a - 1) // geo.sh + 1 if geo.h + geo.ph > a else 0
        for b in range(geo.sw):
            v0 = -(-(geo.pw - b) // geo.sw) if geo.pw > b else 0
            v1 = (geo.w + geo.pw - b - 1) // geo.sw + 1 if geo.w + geo.pw > b else 0
            if u1 <= u0 or v1 <= v0:
                continue
            h0, w0 = u0 * geo.sh + a - geo.ph, v0 * geo.sw + b - geo.pw
            src = Access(image.buf, dt, image.offset + h0 * sh + w0 * sw,
                         (sn, sc, geo.sh * sh, geo.sw * sw))
            dst = Access(st["xpad"], dt, (a * geo.sw + b) * ps + u0 * ws + v0,
                         (geo.c * p, p, ws, 1))
            out.append((src, dst, (geo.c, u1 - u0, v1 - v0)))
    return out


def emit(plan, group, fg):
    """The op of group (prepare made its state) into fg."""
    node, st = group.root, group.state
    geo, dt = st["geo"], st["dt"]
    ws, ps, p, nw, kk = st["ws"], st["ps"], st["p"], st["nw"], st["kk"]
    c = lambda v: ir.Constant(I64, v)                                   # noqa: E731
    op = node.op
    out = plan.out_access(group)
    if op != "convolution_backward_input":
        zero(fg, st["xpad"], dt, st["chunks"] * geo.c * p)
    if op != "convolution":
        zero(fg, st["wide"], dt, st["chunks"] * geo.o * nw)
    if op == "convolution_backward_weight":
        zero(fg, st["partial"], dt, st["chunks"] * kk * geo.o * geo.cg)
    else:
        _pack_weights(fg, st, op == "convolution_backward_input")
    plane = Access(st["xpad"], dt, 0, (geo.c * p, p, 1))                 # [tid, c, position]
    wide = Access(st["wide"], dt, 0, (geo.o * nw, nw, 1))                # [tid, o, column]
    wide_rows = Access(st["wide"], dt, 0, (geo.o * nw, nw, ws, 1))       # [tid, o, r, q]
    packed = Access(st.get("packed"), dt, 0, (geo.o * geo.cg, geo.cg, 1) if op == "convolution"
                    else (geo.c * geo.og, geo.og, 1))                    # [k, row, col]
    gemm = st["gemm"]

    def shifts(g, body):
        """body(gi, k, off) for every group and kernel offset."""
        b = g.b
        with for_range(b, 0, geo.g, name="grp") as gi:
            with for_range(b, 0, geo.kh, name="ki") as i:
                with for_range(b, 0, geo.kw, name="kj") as j:
                    k = b.add(b.mul(i, c(geo.kw)), j)
                    di, dj = b.mul(i, c(geo.dh)), b.mul(j, c(geo.dw))
                    phase = b.add(b.mul(b.urem(di, c(geo.sh)), c(geo.sw)),
                                  b.urem(dj, c(geo.sw)))
                    off = b.add(b.add(b.mul(phase, c(ps)),
                                      b.mul(b.udiv(di, c(geo.sh)), c(ws))),
                                b.udiv(dj, c(geo.sw)))
                    body(gi, k, off)

    def copy_image(g, src, n, tid, flag=None):
        for image, padded, extents in _phases(geo, st, src):
            with loop_nest(g.b, extents, name="in") as (ch, u, v):
                value = g.load(image, [n, ch, u, v])
                g.store(value, padded, [tid, ch, u, v])
                if flag is not None:
                    _flag_loop(g, flag, value)

    def copy_grad(g, n, tid):
        with loop_nest(g.b, (geo.o, geo.oh, geo.ow), name="gw") as (o, r, q):
            g.store(g.load(st["grad"], [n, o, r, q]), wide_rows, [tid, o, r, q])

    if op == "convolution":
        def body(g, lo, hi, tid):
            b = g.b
            with for_range(b, lo, hi, name="img") as n:
                copy_image(g, st["x"], n, tid)

                def product(gi, k, off):
                    go, gc = b.mul(gi, c(geo.og)), b.mul(gi, c(geo.cg))
                    gemm.call(g, g.address(packed, [k, go, c(0)]),
                              g.address(plane, [tid, gc, off]),
                              g.address(wide, [tid, go, c(0)]), nw,
                              b.icmp_signed("!=", k, c(0)))
                shifts(g, product)
                with loop_nest(b, (geo.o, geo.oh, geo.ow), name="keep") as (o, r, q):
                    value = g.load(wide_rows, [tid, o, r, q])
                    if st["bias"] is not None:
                        value = g.sg.add(value, g.load(st["bias"], [o]))
                    g.store(value, out, [n, o, r, q])
    elif op == "convolution_backward_input":
        finite = Access(st["finite"], dt, 0, (1,))

        def body(g, lo, hi, tid):
            b = g.b
            ok = g.sg.cmp("!=", g.load(finite, [c(0)]), g.sg.const(0, dt)).v
            with for_range(b, lo, hi, name="img") as n:
                copy_grad(g, n, tid)
                with for_range(b, 0, geo.c * p, name="z") as e:
                    g.store(g.sg.const(0, dt), plane, [tid, c(0), e])
                with b.if_else(ok) as (whole, by_rows):
                    with whole:
                        def product(gi, k, off):
                            go, gc = b.mul(gi, c(geo.og)), b.mul(gi, c(geo.cg))
                            gemm.call(g, g.address(packed, [k, gc, c(0)]),
                                      g.address(wide, [tid, go, c(0)]),
                                      g.address(plane, [tid, gc, off]), p, True)
                        shifts(g, product)
                    with by_rows:
                        def row_products(gi, k, off):
                            go, gc = b.mul(gi, c(geo.og)), b.mul(gi, c(geo.cg))
                            with for_range(b, 0, geo.oh, name="row") as r:
                                at = b.mul(r, c(ws))
                                st["rows"].call(g, g.address(packed, [k, gc, c(0)]),
                                                g.address(wide, [tid, go, at]),
                                                g.address(plane, [tid, gc, b.add(off, at)]),
                                                p, True)
                        shifts(g, row_products)
                for image, padded, extents in _phases(geo, st, out):
                    with loop_nest(b, extents, name="dx") as (ch, u, v):
                        g.store(g.load(padded, [tid, ch, u, v]), image, [n, ch, u, v])
    else:
        tr = bool(st.get("transposed"))     # (a group's block: C/G x O/G, else O/G x C/G)
        part = Access(st["partial"], dt, 0, (kk * geo.o * geo.cg, geo.o * geo.cg, geo.og * geo.cg)
                      + ((1, geo.og) if tr else (geo.cg, 1)))           # [t, k, g, o, c]

        def weight_product(g, gemm, a, x, pc):
            gemm.call(g, *((x, a, pc, geo.og) if tr else (a, x, pc, geo.cg)), True)

        def body(g, lo, hi, tid):
            b = g.b
            flag = g.alloca(BOOL)
            with for_range(b, lo, hi, name="img") as n:
                b.store(ir.Constant(BOOL, 0), flag)
                copy_image(g, st["x"], n, tid, flag)
                copy_grad(g, n, tid)
                with b.if_else(b.load(flag, typ=BOOL)) as (by_rows, whole):
                    with whole:
                        def product(gi, k, off):
                            go, gc = b.mul(gi, c(geo.og)), b.mul(gi, c(geo.cg))
                            weight_product(g, gemm, g.address(wide, [tid, go, c(0)]),
                                           g.address(plane, [tid, gc, off]),
                                           g.address(part, [tid, k, gi, c(0), c(0)]))
                        shifts(g, product)
                    with by_rows:
                        def row_products(gi, k, off):
                            go, gc = b.mul(gi, c(geo.og)), b.mul(gi, c(geo.cg))
                            with for_range(b, 0, geo.oh, name="row") as r:
                                at = b.mul(r, c(ws))
                                weight_product(g, st["rows"], g.address(wide, [tid, go, at]),
                                               g.address(plane, [tid, gc, b.add(off, at)]),
                                               g.address(part, [tid, k, gi, c(0), c(0)]))
                        shifts(g, row_products)
    flops = 2 * geo.o * geo.cg * kk * nw
    parallel_range(fg, geo.n, body, work_per_iter=max(1, flops // 8), grain=st["grain"])
    if op == "convolution_backward_weight":     # the chunks' sums, in chunk order
        b = fg.b
        with loop_nest(b, (geo.g, geo.og, geo.cg, geo.kh, geo.kw), name="dw") as idx:
            gi, oo, ch, i, j = idx
            k, o = b.add(b.mul(i, c(geo.kw)), j), b.add(b.mul(gi, c(geo.og)), oo)
            # (a loop, as in ops_conv.py: the same code for every chunk count)
            fg.store(fg.load(part, [c(0), k, gi, oo, ch]), out, [o, ch, i, j])
            with for_range(b, 1, st["chunks"], name="chunk") as t:
                acc = fg.sg.add(fg.load(out, [o, ch, i, j]), fg.load(part, [t, k, gi, oo, ch]))
                fg.store(acc, out, [o, ch, i, j])
