"""Depthwise convolutions (one input channel per group: MobileNet's, ConvNeXt's 7x7) as direct
loops, without an unfold or a GEMM: the forward and the weight gradient of stride 1, the
input gradient of any stride. ops_conv.py's im2col path (which runs strided forwards and
weight gradients, measured no faster here) makes them KH*KW copies of the input and a
(Og x KH*KW) @ (KH*KW x OH*OW) product per image and channel: a BLAS call per plane for a few
thousand multiply-adds, 2-5x PyTorch's direct kernels.

The loops run over planes (image and channel; a channel over every image for the weight
gradient), split among the threads:
- stride 1 ("wide" rows): the input plane is copied once into zero-padded scratch (rows of
  Wp = W + 2*pw, (KW-1)*dw zeros of slack); on that grid kernel offset (i, j) is one shift,
  off = i*dh*Wp + j*dw, so the forward is KH*KW passes wide[m] += w[o, 0, i, j] *
  xpad[m + off] over m < OH*Wp, each one contiguous run the vectoriser takes whole; the
  first OW columns of each row of wide are the output (the others are never kept). The
  padding's zeros meet the weights as in the NumPy implementation (the reference), so an
  infinite or NaN weight gives NaN where it does. The input gradient likewise adds
  w * gwide (the gradient on the same grid, zeros past OW) into dxpad shifted, whose
  interior is dx; where a weight is not finite those zeros would meet it (inf * 0 = NaN
  where the reference adds no such term), so that offset runs the direct loop instead.
  The weight gradient sums gwide * xpad shifted in float64 (see _weight_grad).
- the input gradient of other strides (direct): each offset adds w * grad into the input
  positions its valid outputs read, the range computed once per offset (no test per
  element)."""
from llvmlite import ir

from .conv_common import MAX_CHUNKS, valid_range
from .loops import Access, for_range
from .parallel import parallel_range
from .scalar import I64, Scalar

_c = lambda v: ir.Constant(I64, v)                                      # noqa: E731


def applies(node, geo):
    """Whether the convolution is depthwise (one input channel per group, several groups)
    and the op one this module runs: the input gradient, the others of stride 1."""
    if geo.cg != 1 or geo.g == 1:
        return False
    return node.op == "convolution_backward_input" or _wide(geo)


def _wide(geo):
    return geo.sh == 1 and geo.sw == 1


def prepare(plan, group, st):
    node, geo, dt = group.root, st["geo"], st["dt"]
    u, v = node.inputs[:2]
    if node.op == "convolution_backward_weight":
        planes = geo.o          # (a thread sums its channels over every image)
        st["grad"], st["x"] = plan.access(u, u.type.shape), plan.access(v, v.type.shape)
    else:
        planes = geo.n * (geo.o if node.op == "convolution" else geo.c)
        st["w"] = plan.access(v, v.type.shape)
        st["x" if node.op == "convolution" else "grad"] = plan.access(u, u.type.shape)
    if node.op == "convolution":
        bias = node.inputs[2]
        st["bias"] = plan.access(bias, (geo.o,)) if bias is not None else None
    st["grain"] = -(-max(planes, 1) // MAX_CHUNKS)
    chunks = -(-max(planes, 1) // st["grain"])
    if node.op == "convolution_backward_weight":
        st["sums"] = plan.temp(group, "float64", chunks * geo.kh * geo.kw)
    if _wide(geo):
        wp = geo.w + 2 * geo.pw
        st["npad"] = (geo.h + 2 * geo.ph) * wp + (geo.kw - 1) * geo.dw  # (with the slack)
        st["nwide"] = geo.oh * wp
        st["pad"] = plan.temp(group, dt, chunks * st["npad"])
        st["wide"] = plan.temp(group, dt, chunks * st["nwide"])


def _offsets(g, geo, body):
    """body(i, j, rows, cols): for every kernel offset, its valid output rows and columns."""
    b = g.b
    with for_range(b, 0, geo.kh, name="ki") as i:
        rows = valid_range(b, i, geo.dh, geo.ph, geo.sh, geo.h, geo.oh)
        with for_range(b, 0, geo.kw, name="kj") as j:
            body(i, j, rows, valid_range(b, j, geo.dw, geo.pw, geo.sw, geo.w, geo.ow))


def _inside(g, geo, i, j, rows, cols, body):
    """body(oh, ow, ih, iw) over the valid positions of offset (i, j)."""
    b = g.b
    with for_range(b, rows[0], rows[1], name="oh") as oh:
        ih = b.sub(b.add(b.mul(oh, _c(geo.sh)), b.mul(i, _c(geo.dh))), _c(geo.ph))
        with for_range(b, cols[0], cols[1], name="ow") as ow:
            body(oh, ow, ih, b.sub(b.add(b.mul(ow, _c(geo.sw)), b.mul(j, _c(geo.dw))),
                                   _c(geo.pw)))


def _flat(buf, dt):
    return Access(buf, dt, 0, (1,))


def _interior(g, geo, p0, body):
    """body(ih, iw, at) over the input plane, at: the position's index in the padded plane
    whose scratch starts at p0 (its borders and slack are never written: they stay zero)."""
    b, wp = g.b, geo.w + 2 * geo.pw
    with for_range(b, 0, geo.h, name="ih") as ih:
        row = b.add(p0, b.add(b.mul(b.add(ih, _c(geo.ph)), _c(wp)), _c(geo.pw)))
        with for_range(b, 0, geo.w, name="iw") as iw:
            body(ih, iw, b.add(row, iw))


def _fill(g, acc, start, n, value):
    with for_range(g.b, 0, n, name="f") as k:
        g.store(value, acc, [g.b.add(start, k)])


def _forward(g, st, geo, dt, out, n, o, tid):
    """out[n, o] of the forward (stride 1): see the module's docstring."""
    b, sg = g.b, g.sg
    ch = b.sdiv(o, _c(geo.og))
    x, w, bias = st["x"], st["w"], st["bias"]
    start = g.load(bias, [o]) if bias is not None else sg.const(0, dt)
    wp = geo.w + 2 * geo.pw
    pad, wide = _flat(st["pad"], dt), _flat(st["wide"], dt)
    p0, w0 = b.mul(tid, _c(st["npad"])), b.mul(tid, _c(st["nwide"]))
    _interior(g, geo, p0, lambda ih, iw, at: g.store(g.load(x, [n, ch, ih, iw]), pad, [at]))
    _fill(g, wide, w0, st["nwide"], start)
    with for_range(b, 0, geo.kh, name="ki") as i:
        with for_range(b, 0, geo.kw, name="kj") as j:
            wv = g.load(w, [o, _c(0), i, j])
            off = b.add(p0, b.add(b.mul(i, _c(geo.dh * wp)), b.mul(j, _c(geo.dw))))
            with for_range(b, 0, st["nwide"], name="m") as m:
                at = b.add(w0, m)
                g.store(sg.add(g.load(wide, [at]), sg.mul(wv, g.load(pad, [b.add(off, m)]))),
                        wide, [at])
    with for_range(b, 0, geo.oh, name="oh") as oh:
        with for_range(b, 0, geo.ow, name="ow") as ow:
            g.store(g.load(wide, [b.add(w0, b.add(b.mul(oh, _c(wp)), ow))]), out,
                    [n, o, oh, ow])


def _backward_input(g, st, geo, dt, out, n, ch, tid):
    """out[n, ch] of the input gradient: see the module's docstring."""
    b, sg = g.b, g.sg
    grad, w = st["grad"], st["w"]
    if not _wide(geo):
        with for_range(b, 0, geo.h, name="zh") as ih:
            with for_range(b, 0, geo.w, name="zw") as iw:
                g.store(sg.const(0, dt), out, [n, ch, ih, iw])
        with for_range(b, 0, geo.og, name="oo") as oo:
            o = b.add(b.mul(ch, _c(geo.og)), oo)

            def offset(i, j, rows, cols):
                wv = g.load(w, [o, _c(0), i, j])

                def add(oh, ow, ih, iw):
                    idx = [n, ch, ih, iw]
                    g.store(sg.add(g.load(out, idx), sg.mul(wv, g.load(grad, [n, o, oh, ow]))),
                            out, idx)
                _inside(g, geo, i, j, rows, cols, add)
            _offsets(g, geo, offset)
        return
    wp = geo.w + 2 * geo.pw
    pad, wide = _flat(st["pad"], dt), _flat(st["wide"], dt)
    p0, w0 = b.mul(tid, _c(st["npad"])), b.mul(tid, _c(st["nwide"]))
    _fill(g, pad, p0, st["npad"], sg.const(0, dt))
    with for_range(b, 0, geo.og, name="oo") as oo:
        o = b.add(b.mul(ch, _c(geo.og)), oo)
        with for_range(b, 0, geo.oh, name="gh") as oh:    # (the columns past OW stay zero)
            with for_range(b, 0, geo.ow, name="gw") as ow:
                g.store(g.load(grad, [n, o, oh, ow]), wide,
                        [b.add(w0, b.add(b.mul(oh, _c(wp)), ow))])

        def offset(i, j, rows, cols):
            wv = g.load(w, [o, _c(0), i, j])
            finite = b.fcmp_ordered("==", b.fsub(wv.v, wv.v), ir.Constant(wv.v.type, 0.0))
            with b.if_else(finite) as (shifted, direct):
                with shifted:
                    off = b.add(p0, b.add(b.mul(i, _c(geo.dh * wp)), b.mul(j, _c(geo.dw))))
                    with for_range(b, 0, st["nwide"], name="m") as m:
                        at = b.add(off, m)
                        g.store(sg.add(g.load(pad, [at]),
                                       sg.mul(wv, g.load(wide, [b.add(w0, m)]))), pad, [at])
                with direct:            # (the zeros past OW must not meet an inf or NaN)
                    def add(oh, ow, ih, iw):
                        at = b.add(p0, b.add(b.mul(b.add(ih, _c(geo.ph)), _c(wp)),
                                             b.add(iw, _c(geo.pw))))
                        g.store(sg.add(g.load(pad, [at]),
                                       sg.mul(wv, g.load(grad, [n, o, oh, ow]))), pad, [at])
                    _inside(g, geo, i, j, rows, cols, add)
        _offsets(g, geo, offset)
    _interior(g, geo, p0, lambda ih, iw, at: g.store(g.load(pad, [at]), out, [n, ch, ih, iw]))


def _weight_grad(g, st, geo, dt, out, o, tid):
    """out[o] of the weight gradient (stride 1): per kernel offset the sum over the images
    of grad * the padded input shifted, in float64. With the gradient on the wide grid
    (zeros past OW) each sum is one contiguous run; those zeros would meet the input's
    values past each row, so an image whose input plane is not all finite sums row by row
    over the OW columns instead. Either way the padding's zeros meet the gradient, as in
    the reference's unfold."""
    b, sg = g.b, g.sg
    f64 = ir.DoubleType()
    x, grad = st["x"], st["grad"]
    wp, kk = geo.w + 2 * geo.pw, geo.kh * geo.kw
    ch = b.sdiv(o, _c(geo.og))
    pad, wide, sums = _flat(st["pad"], dt), _flat(st["wide"], dt), _flat(st["sums"], "float64")
    p0, w0, s0 = (b.mul(tid, _c(n)) for n in (st["npad"], st["nwide"], kk))
    slot = g.alloca(f64, "acc")

    def add(v):                 # (reassociated: the sums vectorise)
        b.store(b.fadd(b.load(slot, typ=f64), sg.cast(v, "float64").v, flags=("reassoc",)),
                slot)

    def offset_sum(k, body):    # sums[k] += the sum body adds up
        b.store(ir.Constant(f64, 0.0), slot)
        body(b.add(p0, b.add(b.mul(b.sdiv(k, _c(geo.kw)), _c(geo.dh * wp)),
                             b.mul(b.srem(k, _c(geo.kw)), _c(geo.dw)))))
        at = b.add(s0, k)
        g.store(sg.add(g.load(sums, [at]), Scalar(b.load(slot, typ=f64), "float64")), sums,
                [at])
    _fill(g, sums, s0, kk, sg.const(0, "float64"))
    with for_range(b, 0, geo.n, name="img") as n:
        b.store(ir.Constant(f64, 0.0), slot)    # (sum of v - v: 0 when all are finite)
        def copy(ih, iw, at):
            v = g.load(x, [n, ch, ih, iw])
            g.store(v, pad, [at])
            add(sg.sub(v, v))
        _interior(g, geo, p0, copy)
        finite = b.fcmp_ordered("==", b.load(slot, typ=f64), ir.Constant(f64, 0.0))
        with for_range(b, 0, geo.oh, name="gh") as oh:    # (the columns past OW stay zero)
            with for_range(b, 0, geo.ow, name="gw") as ow:
                g.store(g.load(grad, [n, o, oh, ow]), wide,
                        [b.add(w0, b.add(b.mul(oh, _c(wp)), ow))])
        with b.if_else(finite) as (shifted, rows):
            with shifted, for_range(b, 0, kk, name="k") as k:
                offset_sum(k, lambda off: _run(b, st["nwide"], lambda m: add(sg.mul(
                    g.load(wide, [b.add(w0, m)]), g.load(pad, [b.add(off, m)])))))
            with rows, for_range(b, 0, kk, name="k") as k:
                def by_rows(off):
                    with for_range(b, 0, geo.oh, name="oh") as oh:
                        row = b.add(off, b.mul(oh, _c(wp)))
                        with for_range(b, 0, geo.ow, name="ow") as ow:
                            add(sg.mul(g.load(grad, [n, o, oh, ow]),
                                       g.load(pad, [b.add(row, ow)])))
                offset_sum(k, by_rows)
    with for_range(b, 0, kk, name="k") as k:
        g.store(sg.cast(g.load(sums, [b.add(s0, k)]), dt), out,
                [o, _c(0), b.sdiv(k, _c(geo.kw)), b.srem(k, _c(geo.kw))])


def _run(b, n, body):
    with for_range(b, 0, n, name="m") as m:
        body(m)


def emit(plan, group, fg):
    node, st = group.root, group.state
    geo, dt = st["geo"], st["dt"]
    out = plan.out_access(group)
    if node.op == "convolution_backward_weight":
        def weights(g, lo, hi, tid):
            for buf, n in ((st["pad"], st["npad"]), (st["wide"], st["nwide"])):
                _fill(g, _flat(buf, dt), g.b.mul(tid, _c(n)), n, g.sg.const(0, dt))
            with for_range(g.b, lo, hi, name="oc") as o:
                _weight_grad(g, st, geo, dt, out, o, tid)
        parallel_range(fg, geo.o, weights, work_per_iter=2 * geo.n * geo.kh * geo.kw * geo.m,
                       grain=st["grain"])
        return
    forward = node.op == "convolution"
    count = geo.o if forward else geo.c

    def body(g, lo, hi, tid):
        b = g.b
        if _wide(geo):          # (this chunk's scratch: the borders and slack stay zero)
            if forward:
                _fill(g, _flat(st["pad"], dt), b.mul(tid, _c(st["npad"])), st["npad"],
                      g.sg.const(0, dt))
            else:
                _fill(g, _flat(st["wide"], dt), b.mul(tid, _c(st["nwide"])), st["nwide"],
                      g.sg.const(0, dt))
        with for_range(b, lo, hi, name="plane") as p:
            n, k = b.sdiv(p, _c(count)), b.srem(p, _c(count))
            (_forward if forward else _backward_input)(g, st, geo, dt, out, n, k, tid)
    per_plane = 2 * geo.kh * geo.kw * geo.m * (1 if forward else geo.og)
    parallel_range(fg, geo.n * count, body, work_per_iter=per_plane, grain=st["grain"])
