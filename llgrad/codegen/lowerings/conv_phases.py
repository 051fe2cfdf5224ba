"""im2col and col2im of strided convolutions on phase planes (ops_conv.py: the forward's and
the weight gradient's unfold, the input gradient's fold; per image and batched).

A kernel offset (i, j) of a stride (sh, sw) convolution reads (unfold) or adds into (fold)
every sh-th row and sw-th column of the input: done straight on the input, each is a
strided copy or read-modify-write of a few elements (the rows of a small map are 4 or 8
long), which ran at about an element a cycle. On the padded input's grid (th = ih + ph =
sh*oh + dh*i), offset (i, j) touches one phase (ri, rj) = (dh*i % sh, dw*j % sw) of it, at
(u, v) = (oh + dh*i // sh, ow + dw*j // sw): in a plane per phase, its rows are unit-stride
runs over the whole output map, with no bounds (the planes hold the padding's zeros; the
fold's adds into the padding are never read). One pass moves the image between its rows
and the phase planes (after a fold it writes the input gradient whole: no zeroing). The
fold adds into an element in the same (channel, i, j) order as the direct fold, and the
unfold copies the same values: results are the same to the bit."""
from llvmlite import ir

from .loops import Access, for_range
from .scalar import I64

MAX_OFFSETS = 25        # kernel offsets (KH*KW) emitted one loop nest each: up to 5x5
MIN_UNFOLD_ROW = 8      # output columns (OW) for an unfold on the planes


def applies(geo, op):
    """Strided (the phases are the gain; at stride 1 the direct loops are unit-stride
    already) by a kernel that covers the stride (a 1x1 stride-2 kernel would move every
    phase for the one it reads), with few enough kernel offsets to emit one nest each. An
    unfold only where the output rows are a vector long (MIN_UNFOLD_ROW): on 4-wide maps
    the direct copy's short rows ran faster (measured: 4x4 maps of 64 channels, stride 2)
    than a move into the planes plus a copy out of them; a fold gains at every width."""
    if not (geo.sh > 1 or geo.sw > 1) or geo.kh < geo.sh or geo.kw < geo.sw or \
            geo.kh * geo.kw > MAX_OFFSETS:
        return False
    return op == "convolution_backward_input" or geo.ow >= MIN_UNFOLD_ROW


def _plane(geo):
    """Rows and columns of one phase plane: every (u, v) a fold or unfold touches or a
    move reaches (inputs no window reaches read the zeros the planes start with)."""
    hu = max(geo.oh + geo.dh * (geo.kh - 1) // geo.sh, (geo.h - 1 + geo.ph) // geo.sh + 1)
    wu = max(geo.ow + geo.dw * (geo.kw - 1) // geo.sw, (geo.w - 1 + geo.pw) // geo.sw + 1)
    return hu, wu


def numel(geo):
    """Elements of one image's phase planes (a chunk's scratch)."""
    hu, wu = _plane(geo)
    return geo.c * geo.sh * geo.sw * hu * wu


def fold(fg, geo, dcols, dx, n, tid, buf, slot):
    """dx[n] = the fold of dcols[tid] (indexed [tid, channel, i, j, oh, ow]), through the
    phase planes in scratch `buf` (chunk `slot` of numel(geo) elements each; zeroed here:
    every fold adds into them)."""
    b, sg, dt = fg.b, fg.sg, dcols.dt
    c = lambda v: ir.Constant(I64, v)                                   # noqa: E731
    per = numel(geo)
    planes = _planes(buf, dt, geo)
    flat = Access(buf, dt, 0, (per, 1))
    with for_range(b, 0, per, name="pz") as e:
        fg.store(sg.const(0, dt), flat, [slot, e])
    with for_range(b, 0, geo.c, name="ch") as ch:
        for i in range(geo.kh):
            qi, ri = divmod(geo.dh * i, geo.sh)
            for j in range(geo.kw):
                qj, rj = divmod(geo.dw * j, geo.sw)
                with for_range(b, 0, geo.oh, name="oh") as oh:
                    u = b.add(oh, c(qi))
                    with for_range(b, 0, geo.ow, name="ow") as ow:
                        at = [slot, ch, c(ri), c(rj), u, b.add(ow, c(qj))]
                        got = fg.load(dcols, [tid, ch, c(i), c(j), oh, ow])
                        fg.store(sg.add(fg.load(planes, at), got), planes, at)
    _move(fg, geo, planes, dx, n, slot, to_planes=False)


def zero(fg, geo, buf, dt, chunks):
    """Zeros in every chunk's phase planes (the unfold's padding: once a call, as the
    images' copies overwrite the same positions)."""
    flat = Access(buf, dt, 0, (1,))
    with for_range(fg.b, 0, chunks * numel(geo), name="pz") as e:
        fg.store(fg.sg.const(0, dt), flat, [e])


def unfold(fg, geo, x, cols, n, tid, buf, slot):
    """cols[tid] (indexed [tid, channel, i, j, oh, ow]) = the windows of x[n], through the
    phase planes in scratch `buf` (chunk `slot`; zeroed once a call first: zero())."""
    b = fg.b
    c = lambda v: ir.Constant(I64, v)                                   # noqa: E731
    planes = _planes(buf, x.dt, geo)
    _move(fg, geo, planes, x, n, slot, to_planes=True)
    with for_range(b, 0, geo.c, name="ch") as ch:
        for i in range(geo.kh):
            qi, ri = divmod(geo.dh * i, geo.sh)
            for j in range(geo.kw):
                qj, rj = divmod(geo.dw * j, geo.sw)
                with for_range(b, 0, geo.oh, name="oh") as oh:
                    u = b.add(oh, c(qi))
                    with for_range(b, 0, geo.ow, name="ow") as ow:
                        got = fg.load(planes, [slot, ch, c(ri), c(rj), u, b.add(ow, c(qj))])
                        fg.store(got, cols, [tid, ch, c(i), c(j), oh, ow])


def _planes(buf, dt, geo):
    """The phase planes as [chunk, channel, ri, rj, u, v]."""
    hu, wu = _plane(geo)
    return Access(buf, dt, 0, (numel(geo), geo.sh * geo.sw * hu * wu, geo.sw * hu * wu,
                               hu * wu, wu, 1))


def _move(fg, geo, planes, img, n, slot, to_planes):
    """Between img[n, ch, ih, iw] and planes[slot, ch, th % sh, tw % sw, th // sh, tw // sw]
    (th = ih + ph, tw = iw + pw), either way: along a row, the sw column phases move
    together (one interleaved group of loads or stores, which LLVM vectorises) where all of
    them fall inside the row, one by one at its ends."""
    b = fg.b
    c = lambda v: ir.Constant(I64, v)                                   # noqa: E731
    sw, pw = geo.sw, geo.pw
    spans = [(max(0, -(-(pw - rj) // sw)), max(0, -(-(geo.w + pw - rj) // sw)))
             for rj in range(sw)]                   # v with 0 <= sw*v + rj - pw < W
    lo, hi = max(s[0] for s in spans), min(s[1] for s in spans)
    hi = max(hi, lo)

    def put(ch, ih, ri, u, v, rj):
        iw = b.add(b.mul(v, c(sw)), c(rj - pw))
        at, pos = [slot, ch, ri, c(rj), u, v], [n, ch, ih, iw]
        if to_planes:
            fg.store(fg.load(img, pos), planes, at)
        else:
            fg.store(fg.load(planes, at), img, pos)

    with for_range(b, 0, geo.c, name="ich") as ch:
        with for_range(b, 0, geo.h, name="ih") as ih:
            th = b.add(ih, c(geo.ph))
            ri, u = b.urem(th, c(geo.sh)), b.udiv(th, c(geo.sh))
            for rj, (a, z) in enumerate(spans):        # (the ends: a few columns)
                for v0, v1 in ((a, min(lo, z)), (max(hi, a), z)):
                    if v0 < v1:
                        with for_range(b, v0, v1, name="iv") as v:
                            put(ch, ih, ri, u, v, rj)
            if lo < hi:
                with for_range(b, lo, hi, name="v") as v:
                    for rj in range(sw):
                        put(ch, ih, ri, u, v, rj)
