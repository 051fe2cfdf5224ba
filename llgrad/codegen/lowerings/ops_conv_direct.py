"""Convolutions with few input channels (a network's first layer: 1-3 channels, e.g. the
ResNet stem's 7x7 stride-2 3 -> 64, LeNet's 1 -> 6, a CIFAR net's 3 -> 32; up to 7) as direct
register-blocked kernels: the forward and the weight gradient, without an unfold or a GEMM
(ops_conv.py's im2col path wrote KH*KW copies of the input and then ran a product whose K
is tiny: OpenBLAS packs the whole unfold for it, and the pair ran ~2.5x PyTorch's forward).

Each image is moved once into the phase planes of conv_phases.py (zero padding included):
there, kernel offset (i, j) of any stride and dilation reads a unit-stride run of a plane
along the output row, at a constant offset. So, with vectors of VW lanes along the output
width:
- forward: a tile of NO output channels x NV vectors of one output row is held in
  registers; for every (channel, i, j) it loads NV vectors of the plane and broadcasts NO
  weights (NO*NV FMAs). Loads past a row's end read the next row or the scratch's slack:
  those lanes are never stored (masked stores at the row's end); every kept lane sums
  its terms in (channel, i, j) order, then adds the bias (as the unfold's product does).
- weight gradient: NO output channels x JB kernel columns of one (channel, i) are held as
  vector sums over the image's output positions (NO gradient vectors and JB plane vectors
  a step, NO*JB FMAs; the row's last vector masked on both sides, so no value outside
  the map meets another); the lane sums are added into a chunk's vector partials, summed
  over the chunks in chunk order and then across the lanes after the join (deterministic
  for a thread count).
The input gradient (the first layer's input rarely wants one) stays on the unfold path."""
from llvmlite import ir

from ..native import jit
from . import conv_phases as phases
from .conv_common import MAX_CHUNKS
from .gemm import _Gen
from .loops import Access, for_range
from .parallel import parallel_range
from .scalar import F32, F64, I64

# input channels at most: from 8 stride-1 convolutions are shifted products
# (ops_conv_shifted.py); 6 -> 32 3x3 on 32x32 maps ran 2.2 ms unfolded, 1.3 ms here
MAX_CHANNELS = 7
MAX_COLUMNS = 16        # kernel columns (KW), each emitted as straight-line code
_c = lambda v: ir.Constant(I64, v)                                      # noqa: E731


def applies(node, geo, dt):
    """The forward and weight gradient of an ungrouped convolution with few input
    channels, a kernel row short enough to unroll, and output rows a vector long or more
    (on 8-wide rows, half a 16-lane vector, the unfold ran 3 -> 32 3x3 stride 2 in 0.14
    ms, these kernels in 0.21: ops_conv.py's unfold, or its one product over all the
    images, serves them). ops_conv.py asks its batched path first."""
    return node.op in ("convolution", "convolution_backward_weight") and geo.g == 1 and \
        geo.cg <= MAX_CHANNELS and geo.kw <= MAX_COLUMNS and geo.oh > 0 and \
        geo.ow >= _vector(dt)[0] and geo.n > 0


def _vector(dt):
    """(lanes, registers) of the target's vectors for dt."""
    bits = max(jit.jit().vector_bits, 128)
    return bits // (32 if dt == "float32" else 64), 32 if bits >= 512 else 16


def _blocks(total, most):
    """(size, full blocks, remainder) splitting total into blocks of at most `most`,
    as even as the count of blocks allows."""
    size = -(-total // -(-total // max(most, 1)))
    return size, total // size, total % size


def forward_tile(geo, vw, regs):
    """(NV, NO) of the forward's register tile: the fewest lanes computed (the row's last
    tile rounds up) with the fewest loads per FMA. With one vector a step each weight's
    broadcast folds into its FMA (a memory operand): NO + 3 registers. With more, the
    broadcasts are registers: NO*NV + NV + NO of them at most. Two vectors are never
    chosen: LLVM's scheduler hoisted the broadcasts of several steps ahead of their FMAs
    there and spilled (8 x 2: 213 spills, 1.7x the time of 16 x 1; 7 x 3 and 4 x 4: none)."""
    vecs = -(-geo.ow // vw)
    best = None
    for nv in [1] + list(range(3, min(vecs, 8) + 1)):
        most = regs - 3 if nv == 1 else (regs - nv) // (nv + 1)
        if most < 1:
            break
        no = _blocks(geo.o, most)[0]
        cost = -(-vecs // nv) * nv * (1 + 0.5 * (nv + no) / (nv * no))
        if best is None or cost < best[0]:
            best = (cost, nv, no)
    return best[1], best[2]


def weight_tile(geo, regs):
    """(NO, JB) of the weight gradient's tile: NO*JB sums + NO gradient vectors + 2
    registers at most, the fewest loads per FMA."""
    best = None
    for no in range(1, min(geo.o, regs) + 1):
        most = (regs - 2 - no) // no
        if most < 1:
            break
        jb = _blocks(geo.kw, most)[0]
        cost = (no + jb) / (no * jb)
        if best is None or cost < best[0]:
            best = (cost, no, jb)
    return best[1], best[2]


def prepare(plan, group, st):
    """Scratch of group's op (st: ops_conv's state with geo, dt, and the contiguous
    weight (forward) or gradient (weight gradient) already in st)."""
    node, geo, dt = group.root, st["geo"], st["dt"]
    vw, regs = _vector(dt)
    st["vw"], st["regs"] = vw, regs
    st["chunks"] = min(MAX_CHUNKS, geo.n)
    st["grain"] = -(-geo.n // st["chunks"])
    st["chunks"] = -(-geo.n // st["grain"])
    slack = 8 * vw                          # (the forward's loads past the last row)
    st["planes"] = plan.temp(group, dt, st["chunks"] * phases.numel(geo) + slack)
    if node.op == "convolution_backward_weight":
        st["partial"] = plan.temp(group, dt, st["chunks"] * geo.o * geo.k * vw)


def emit(plan, group, fg):
    node, st = group.root, group.state
    geo, dt = st["geo"], st["dt"]
    phases.zero(fg, geo, st["planes"], dt, st["chunks"])   # (the padding's zeros)
    if node.op == "convolution":
        body = _forward(plan, group, st)
    else:
        nvec = st["chunks"] * geo.o * geo.k * st["vw"]
        with for_range(fg.b, 0, nvec, name="pz") as e:
            fg.store(fg.sg.const(0, dt), Access(st["partial"], dt, 0, (1,)), [e])
        body = _weight(st)
    flops = 2 * geo.o * geo.k * geo.m
    parallel_range(fg, geo.n, body, work_per_iter=max(1, flops // 8), grain=st["grain"])
    if node.op == "convolution_backward_weight":
        _sum_partials(fg, st, plan.out_access(group))


class _V:
    """Vector helpers for one function: gemm.py's (masked loads and stores, splats)."""

    def __init__(self, g, dt, vw):
        self.ft = F32 if dt == "float32" else F64
        self.gen = _Gen(g.module, self.ft, vw, 0)
        self.g, self.b, self.vt, self.vw = g, g.b, self.gen.vt, vw
        self.fma = self.gen.intrinsic("fma", self.vt, [self.vt] * 3)

    def at(self, ptr, i):
        return self.b.gep(ptr, [i if isinstance(i, ir.Value) else _c(i)], inbounds=True,
                          source_etype=self.ft)

    def load(self, ptr, mask=None):
        if mask is None:
            return self.b.load(ptr, typ=self.vt, align=4)
        return self.gen.load(self.b, ptr, mask)

    def acc(self):
        return self.g.alloca(self.vt)


def _planes_ptr(g, st, tid):
    per = phases.numel(st["geo"])
    return g.b.gep(g.ptrs[st["planes"]], [g.b.mul(tid, _c(per))], inbounds=True,
                   source_etype=F32 if st["dt"] == "float32" else F64)


def _row_offset(b, geo, i, hu, wu):
    """The plane offset of kernel row i (an i64) from a channel's first plane: phase row
    (dh*i) % sh, rows (dh*i) // sh down. (Kernel rows are a loop, their columns straight-
    line code: a fully unrolled 7x7 kernel took LLVM ~1 s more to compile, no faster.)"""
    t = b.mul(i, _c(geo.dh))
    ri, qi = b.urem(t, _c(geo.sh)), b.udiv(t, _c(geo.sh))
    return b.add(b.mul(ri, _c(geo.sw * hu * wu)), b.mul(qi, _c(wu)))


def _col_offset(geo, j, hu, wu):
    """The constant plane offset of kernel column j: phase column (dw*j) % sw, (dw*j) // sw
    along."""
    qj, rj = divmod(geo.dw * j, geo.sw)
    return rj * hu * wu + qj


def _block_origin(b, ob, size, total):
    """The first channel of block ob: blocks of `size`, the last one moved back to end at
    `total` (it overlaps the one before it rather than being a smaller copy of the code)."""
    o0 = b.mul(ob, _c(size))
    return b.select(b.icmp_signed(">", o0, _c(total - size)), _c(total - size), o0)


def _forward(plan, group, st):
    geo, dt, vw = st["geo"], st["dt"], st["vw"]
    nv, no = forward_tile(geo, vw, st["regs"])
    hu, wu = phases._plane(geo)
    out = plan.out_access(group).with_strides((geo.o * geo.m, geo.m, geo.ow, 1))
    w, bias = st["w"].with_strides((geo.k, 1)), st["bias"]
    tiles = -(-geo.ow // (nv * vw))

    def body(g, lo, hi, tid):
        b, v = g.b, _V(g, dt, vw)
        accs = [v.acc() for _ in range(no * nv)]
        planes = phases._planes(st["planes"], dt, geo)
        with for_range(b, lo, hi, name="img") as n:
            phases._move(g, geo, planes, st["x"], n, tid, to_planes=True)
            base_img = _planes_ptr(g, st, tid)
            with for_range(b, 0, geo.oh, name="oh") as oh:
                with for_range(b, 0, tiles, name="tile") as t:
                    ow0 = b.mul(t, _c(nv * vw))
                    base = v.at(base_img, b.add(b.mul(oh, _c(wu)), ow0))
                    masks = [v.gen.mask(b, b.sub(_c(geo.ow - k * vw), ow0))
                             for k in range(nv)]
                    with for_range(b, 0, -(-geo.o // no), name="ob") as ob:
                        o0 = _block_origin(b, ob, no, geo.o)
                        _forward_block(g, v, geo, w, bias, out, accs, base, hu, wu, n, oh,
                                       ow0, masks, o0, no, nv)
    return body


def _forward_block(g, v, geo, w, bias, out, accs, base, hu, wu, n, oh, ow0, masks, o0,
                   cnt, nv):
    """Output channels [o0, o0 + cnt) of the tile at (n, oh, ow0)."""
    b = g.b
    for a in accs:
        b.store(v.gen.zero, a)
    wrows = [g.address(w, [b.add(o0, _c(o)), _c(0)]) for o in range(cnt)]
    with for_range(b, 0, geo.cg, name="ch") as ch:
        cbase = v.at(base, b.mul(ch, _c(geo.sh * geo.sw * hu * wu)))
        with for_range(b, 0, geo.kh, name="ki") as i:
            rbase = v.at(cbase, _row_offset(b, geo, i, hu, wu))
            wk = b.add(b.mul(ch, _c(geo.kh * geo.kw)), b.mul(i, _c(geo.kw)))
            cur = [b.load(a, typ=v.vt) for a in accs]
            for j in range(geo.kw):
                off = _col_offset(geo, j, hu, wu)
                xs = [v.load(v.at(rbase, off + k * v.vw)) for k in range(nv)]
                kk = b.add(wk, _c(j))
                for o in range(cnt):
                    s = v.gen.splat(b, b.load(v.at(wrows[o], kk), typ=v.ft))
                    for k in range(nv):
                        cur[o * nv + k] = b.call(v.fma, [s, xs[k], cur[o * nv + k]])
            for a, x in zip(accs, cur):
                b.store(x, a)
    for o in range(cnt):
        oc = b.add(o0, _c(o))
        bs = None if bias is None else v.gen.splat(b, b.load(g.address(bias, [oc]), typ=v.ft))
        for k in range(nv):
            x = b.load(accs[o * nv + k], typ=v.vt)
            if bs is not None:
                x = b.fadd(x, bs)
            ptr = g.address(out, [n, oc, oh, b.add(ow0, _c(k * v.vw))])
            v.gen.store(b, x, ptr, masks[k])


def _weight(st):
    geo, dt, vw = st["geo"], st["dt"], st["vw"]
    no, jb = weight_tile(geo, st["regs"])
    hu, wu = phases._plane(geo)
    grad = st["grad"].with_strides((geo.o * geo.m, geo.m, geo.ow, 1))
    fullv, tail = divmod(geo.ow, vw)

    def body(g, lo, hi, tid):
        b, v = g.b, _V(g, dt, vw)
        accs = [v.acc() for _ in range(no * jb)]
        planes = phases._planes(st["planes"], dt, geo)
        part = v.at(g.ptrs[st["partial"]], b.mul(tid, _c(geo.o * geo.k * vw)))
        tmask = v.gen.mask(b, _c(tail)) if tail else None
        with for_range(b, lo, hi, name="img") as n:
            phases._move(g, geo, planes, st["x"], n, tid, to_planes=True)
            base_img = _planes_ptr(g, st, tid)
            with for_range(b, 0, -(-geo.o // no), name="ob") as ob:
                o0 = _block_origin(b, ob, no, geo.o)
                done = b.mul(ob, _c(no))        # (channels below: the block before's)
                with for_range(b, 0, geo.cg, name="ch") as ch:
                    cbase = v.at(base_img, b.mul(ch, _c(geo.sh * geo.sw * hu * wu)))
                    with for_range(b, 0, geo.kh, name="ki") as i:
                        rbase = v.at(cbase, _row_offset(b, geo, i, hu, wu))
                        for j0 in range(0, geo.kw, jb):
                            js = list(range(j0, min(j0 + jb, geo.kw)))
                            _weight_block(g, v, geo, grad, accs, part, rbase, hu, wu, n,
                                          ch, i, js, o0, done, no, fullv, tmask)
    return body


def _weight_block(g, v, geo, grad, accs, part, rbase, hu, wu, n, ch, i, js, o0, done, cnt,
                  fullv, tmask):
    """Sums over image n of grad[o] * the plane run of (ch, i, j) for o in [o0, o0 + cnt),
    j in js; added into the chunk's vector partials [o, k, lane] for o >= done."""
    b, nj, vw = g.b, len(js), v.vw
    offs = [_col_offset(geo, j, hu, wu) for j in js]
    for a in accs[:cnt * nj]:
        b.store(v.gen.zero, a)

    def step(oh, ow, mask):
        gv = [v.load(g.address(grad, [n, b.add(o0, _c(o)), oh, ow]), mask)
              for o in range(cnt)]
        row = v.at(rbase, b.add(b.mul(oh, _c(wu)), ow))
        cur = [b.load(a, typ=v.vt) for a in accs[:cnt * nj]]
        for k, off in enumerate(offs):
            x = v.load(v.at(row, off), mask)
            for o in range(cnt):
                cur[o * nj + k] = b.call(v.fma, [gv[o], x, cur[o * nj + k]])
        for a, x in zip(accs, cur):
            b.store(x, a)

    with for_range(b, 0, geo.oh, name="oh") as oh:
        if fullv:
            with for_range(b, 0, fullv, name="ov") as t:
                step(oh, b.mul(t, _c(vw)), None)
        if tmask is not None:
            step(oh, _c(fullv * vw), tmask)
    kb = b.add(b.mul(ch, _c(geo.kh * geo.kw)), b.mul(i, _c(geo.kw)))
    for o in range(cnt):
        oc = b.add(o0, _c(o))
        keep = b.icmp_signed(">=", oc, done)
        orow = b.mul(oc, _c(geo.k))
        for k, j in enumerate(js):
            p = v.at(part, b.mul(b.add(orow, b.add(kb, _c(j))), _c(vw)))
            old = b.load(p, typ=v.vt, align=4)
            new = b.fadd(old, b.load(accs[o * nj + k], typ=v.vt))
            b.store(b.select(keep, new, old), p, align=4)


def _sum_partials(fg, st, out):
    """dW[o, k] = the lanes' sum of the chunks' vector partials, summed in chunk order."""
    geo, dt, vw = st["geo"], st["dt"], st["vw"]
    b, v = fg.b, _V(fg, dt, vw)
    red = _reduce_fn(fg.module, v)
    part = fg.ptrs[st["partial"]]
    dw = out.with_strides((1,))
    span = geo.o * geo.k * vw
    with for_range(b, 0, geo.o * geo.k, name="dw") as e:
        first = v.at(part, b.mul(e, _c(vw)))
        acc = v.load(first)
        slot = fg.alloca(v.vt)
        b.store(acc, slot)
        with for_range(b, 1, st["chunks"], name="chunk") as t:
            p = v.at(first, b.mul(t, _c(span)))
            b.store(b.fadd(b.load(slot, typ=v.vt), v.load(p)), slot)
        s = b.call(red, [ir.Constant(v.ft, -0.0), b.load(slot, typ=v.vt)])
        b.store(s, fg.address(dw, [e]))


def _reduce_fn(module, v):
    name = f"llvm.vector.reduce.fadd.{v.gen.sfx}"
    fn = module.globals.get(name)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(v.ft, [v.ft, v.vt]), name)
    return fn

