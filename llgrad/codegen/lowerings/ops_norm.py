"""Normalisers over dims: softmax, log_softmax, logsumexp, var, std, batch_norm (layer_norm is
lowered as its decomposition: ir/decompose.py).

One kernel per node: a loop nest over the kept dims (split among the threads), and for each
kept index (the exp kernels: for each block of rows, see interleave) two or three passes over
the reduced dims (the operand is read through its own strides, any layout):
  softmax / log_softmax / logsumexp: m = max (NaN-propagating, as np.max), s = sum of
      exp(x - m) (softmax and log_softmax store the exps in their result, then sum them),
      then the normalised values (or log(s) + m);
  var / std: the mean, then the sum of squared deviations (two passes, no
      cancellation; less the squared sum of the deviations / n along dims), then the result.
Sums accumulate in float64 (float32 data then agrees with NumPy's pairwise float32 sums
to a few float32 ulps); exp and log come from vecmath (inline, no libm calls)."""

from llvmlite import ir

from ...ir.graph import Value
from ...ir.geometry import contiguous_strides
from . import ops_norm_columns as columns
from . import vecmath
from .kernel_io import KernelIO
from .loops import Access, loop_nest, normalize
from .ops_batch_norm_rows import MAX_CHANNELS, emit_rows, operands, stats_writer
from .parallel import cost, parallel_loops
from .scalar import F64, I64, Scalar, is_float
from .table import register


def _red_dims(node):
    nd = len(node.inputs[0].type.shape)
    d = node.attrs.get("dim")
    if d is None:
        return tuple(range(nd))
    ds = (d,) if isinstance(d, int) else tuple(d)
    return tuple(sorted({int(i) % max(nd, 1) for i in ds}))


def _check(node):
    x = node.inputs[0]
    if not isinstance(x, Value):
        return "a Python-number operand"
    dt = x.type.dtype
    if not is_float(dt) or node.outputs[0].type.dtype != dt:
        return "non-float operand"
    if not x.type.shape:
        return "a 0-d operand"
    count = 1
    for d in _red_dims(node):
        count *= x.type.shape[d]
    if count == 0 and node.outputs[0].type.numel:
        return "a reduction over an empty dim"
    return None


def _coalesce(shape, red, accesses):
    """(shape, red, accesses) merged by loops.normalize (logical order kept): adjacent dims
    that are all reduced or all kept and that every access walks as one become one dim, and
    size-1 dims go: a reduction over (H, W) of a contiguous image is one loop of H*W (long
    enough to vectorise, not W with a remainder per row)."""
    ext, strides, flags, _ = normalize(shape, [a.strides for a in accesses],
                                       [d in red for d in range(len(shape))])
    return (ext, tuple(d for d, f in enumerate(flags) if f),
            tuple(a.with_strides(st) for a, st in zip(accesses, strides)))


def _emit(plan, group, fg):
    node = group.root
    x = node.inputs[0]
    shape = x.type.shape
    nd = len(shape)
    out = node.outputs[0]
    dt = x.type.dtype
    if out.type.numel == 0:
        return
    red = _red_dims(node)
    kept = [d for d in range(nd) if d not in red]
    count = 1
    for d in red:
        count *= shape[d]
    src = plan.access(x, shape)
    full_out = node.op in ("softmax", "log_softmax")
    if full_out:
        ostr = contiguous_strides(shape)
    else:                       # reduced result: stride 0 on the reduced dims
        keep = node.attrs.get("keepdim", False)
        ocs = contiguous_strides(out.type.shape)
        ostr, k = [], 0
        for d in range(nd):
            if d in red:
                ostr.append(0)
                k += keep
            else:
                ostr.append(ocs[k])
                k += 1
    dst = Access(plan.buffers[out], dt, 0, tuple(ostr))
    shape, red, (src, dst) = _coalesce(shape, red, (src, dst))
    if columns.fits(node, shape, red, src, dst):    # (over C of an (N, C, H, W) tensor)
        return columns.emit(fg, node, shape, red, src, dst, dt, count)
    nd = len(shape)
    kept = [d for d in range(nd) if d not in red]

    def full(oidx, ridx):
        it_o, it_r = iter(oidx), iter(ridx)
        return [next(it_r) if d in red else next(it_o) for d in range(nd)]

    exp_op = node.op in ("softmax", "log_softmax", "logsumexp")
    ext = [shape[d] for d in kept]
    # (code shared between sizes: one row at a time, a structure no size changes)
    nrow = interleave(ext, count) if exp_op and not getattr(
        fg.module, "threads_by_size", False) else 1
    if nrow > 1:
        ext[-1] //= nrow

    def body(g, loops, tid):            # the rows of [lo, hi) of the split kept dim
        b, sg = g.b, g.sg

        def over_red(rows, fn):         # one loop over the reduced dims for all the rows
            with loop_nest(b, [shape[d] for d in red], name="r") as ridx:
                for k, oidx in enumerate(rows):
                    fn(k, full(oidx, ridx))

        def add64(slot, v):
            cur = b.load(slot, typ=F64)
            b.store(b.fadd(cur, v.v, flags=("reassoc",)), slot)

        with loops() as oidx:
            if exp_op:
                rows = [oidx] if nrow == 1 else [
                    oidx[:-1] + [b.add(b.mul(oidx[-1], ir.Constant(I64, nrow)),
                                       ir.Constant(I64, r))] for r in range(nrow)]
                _emit_exp(node, g, src, dst, rows, over_red, full, add64, dt, len(red))
            else:
                s_slot = g.alloca(F64, "s")
                _emit_moments(plan, node, g, src, dst, s_slot, oidx,
                              lambda o, fn: over_red([o], lambda _, i: fn(i)), full, add64,
                              dt, count, shape, len(red))

    # rows over the threads: each costs its passes over `count` elements (exp in two)
    parallel_loops(fg, ext, body, cost=max(1, 3 * count * nrow), rows=True)


def interleave(ext, count):
    """How many rows (8, 4, 2 or 1) the exp kernels take phase by phase in one loop: each
    row's passes are one dependency chain (its max before its exps, its sum before the
    division), which the core cannot overlap with the next row's; 8 rows in one loop give
    it 8 independent chains (a 64-long softmax row: 0.7x the time of one row at a time).
    Only when the innermost kept extent divides (no remainder rows) and the rows together
    stay small enough for L1 between their passes. Each row keeps its own accumulators, so
    a row's result does not depend on the rows beside it."""
    if not ext:
        return 1
    for n in (8, 4, 2):
        if ext[-1] % n == 0 and n * count <= 4096:
            return n
    return 1


def _emit_exp(node, fg, src, dst, rows, over_red, full, add64, dt, nred):
    """softmax / log_softmax / logsumexp of `rows` (kept indices), each phase one loop over
    the reduced dims for all of them (interleave)."""
    b, sg = fg.b, fg.sg
    c = lambda v: sg.const(v, dt)                                   # noqa: E731
    c64 = lambda v: sg.const(v, "float64")                          # noqa: E731
    m_slots = [fg.alloca(c(0).v.type, "m") for _ in rows]
    s_slots = [fg.alloca(F64, "s") for _ in rows]
    for m_slot, s_slot in zip(m_slots, s_slots):
        b.store(c(float("-inf")).v, m_slot)
        b.store(c64(0).v, s_slot)

    def phase(fn):                      # fn(k, idx): row k's step at reduced index idx, all
        over_red(rows, fn)              # the rows in one loop

    def pmax(k, idx):
        cur = Scalar(b.load(m_slots[k], typ=m_slots[k].allocated_type), dt)
        b.store(sg.maximum(cur, fg.load(src, idx)).v, m_slots[k])
    phase(pmax)
    ms = []
    for m_slot in m_slots:
        m = Scalar(b.load(m_slot, typ=m_slot.allocated_type), dt)
        if node.op == "logsumexp":
            fin = b.fcmp_ordered("<", sg.abs(m).v, c(float("inf")).v)
            m = sg.select(fin, m, c(0))
        ms.append(m)

    if node.op == "logsumexp":      # (no row-sized result to hold the exps in)
        phase(lambda k, idx: add64(s_slots[k], sg.cast(
            vecmath.exp(sg, sg.sub(fg.load(src, idx), ms[k])), "float64")))
    else:
        # exp(x - m) into the result, then their sum in a pass of its own: in one loop, the
        # float64 sum would set the vector width for the exp too (half the lanes of float32:
        # twice the time of the row's dearest part); softmax keeps them for the last pass
        phase(lambda k, idx: fg.store(vecmath.exp(sg, sg.sub(fg.load(src, idx), ms[k])),
                                      dst, idx))
        phase(lambda k, idx: add64(s_slots[k], sg.cast(fg.load(dst, idx), "float64")))
    ss = [sg.cast(Scalar(b.load(s_slot, typ=F64), "float64"), dt) for s_slot in s_slots]
    if node.op == "softmax":
        phase(lambda k, idx: fg.store(sg.div(fg.load(dst, idx), ss[k]), dst, idx))
    elif node.op == "log_softmax":
        ls = [vecmath.log(sg, s) for s in ss]
        phase(lambda k, idx: fg.store(
            sg.sub(sg.sub(fg.load(src, idx), ms[k]), ls[k]), dst, idx))
    else:
        for k, oidx in enumerate(rows):
            fg.store(sg.add(vecmath.log(sg, ss[k]), ms[k]), dst, full(oidx, [0] * nred))


def _emit_moments(plan, node, fg, src, dst, s_slot, oidx, over_red, full, add64, dt, count,
                  shape, nred):
    """var / std: the mean, then the squared deviations. With more than one result, their
    sum less (sum of deviations)^2 / count: exactly 0 over equal values (the deviations from
    the rounded mean are all one small d there, and n d^2 - (n d)^2 / n is exact), as
    PyTorch's Welford variance along dims and eager's; one result stays the plain two-pass
    sum, as PyTorch's (not 0 there)."""
    b, sg = fg.b, fg.sg
    c64 = lambda v: sg.const(v, "float64")                          # noqa: E731
    b.store(c64(0).v, s_slot)
    over_red(oidx, lambda idx: add64(s_slot, sg.cast(fg.load(src, idx), "float64")))
    mean = sg.div(Scalar(b.load(s_slot, typ=F64), "float64"), c64(count))
    b.store(c64(0).v, s_slot)
    corrected = node.outputs[0].type.numel > 1
    if corrected:
        d_slot = fg.alloca(F64, "d")
        b.store(c64(0).v, d_slot)

    def dev2(idx):
        d = sg.sub(sg.cast(fg.load(src, idx), "float64"), mean)
        add64(s_slot, sg.mul(d, d))
        if corrected:
            add64(d_slot, d)
    over_red(oidx, dev2)
    ss = Scalar(b.load(s_slot, typ=F64), "float64")
    if corrected:
        sd = Scalar(b.load(d_slot, typ=F64), "float64")
        ss = sg.sub(ss, sg.div(sg.mul(sd, sd), c64(count)))
    denom = max(count - node.attrs.get("correction", 1), 0)
    var = sg.div(ss, c64(denom))
    if node.op == "std":
        var = Scalar(sg.call("llvm.sqrt", F64, var.v), "float64")
    fg.store(sg.cast(var, dt), dst, full(oidx, [0] * nred))


for _op in ("softmax", "log_softmax", "logsumexp", "var", "std"):
    register(_op, "kernel", emit=_emit, check=_check)


# ---- batch_norm -----------------------------------------------------------------------------

def _check_batch_norm(node):
    x, _, _, rmean, rvar, training, stats = operands(node)
    if not isinstance(x, Value) or not is_float(x.type.dtype):
        return "a non-float operand"
    if len(x.type.shape) < 2:
        return "an operand of rank < 2"
    for v in node.inputs[1:]:
        if v is not None and not (isinstance(v, Value) and is_float(v.type.dtype)):
            return "a non-float weight or statistic"
    if not training and (rmean is None or rvar is None):
        return "evaluation without running statistics"
    if stats and node.outputs[0].type.numel == 0:
        return "the statistics of an empty batch"
    return None


def _emit_batch_norm(plan, group, fg):
    """Per channel c: the batch mean and biased variance over dims (0, 2, ...) in float64
    (two passes), or the running statistics; then y = (x - mean) / sqrt(var + eps) * w + b
    in float64, rounded once to x's dtype. batch_norm_with_stats also stores the mean and
    the unbiased variance, rounded to x's dtype, in its second and third results. y's
    elementwise consumers fused in as an epilogue (an activation) are computed from y as
    it is stored (kernel_io.py), and y written only if something else reads it."""
    node = group.root
    x, w, bias, rmean, rvar, training, stats = operands(node)
    out = node.outputs[0]
    shape = x.type.shape
    dt = x.type.dtype
    if out.type.numel == 0:
        return
    nd, nc = len(shape), shape[1]
    red = [0] + list(range(2, nd))
    count = out.type.numel // nc
    io = KernelIO(plan, group)      # (an activation after it: computed at its store)
    src, dst = plan.access(x, shape), io.result(out)
    # (N, C, H, W, ...) walked as (N, C, H*W*...) where the layouts allow (and without the
    # size-1 dims: no channel dim at all when C is 1)
    shape, red, accs = _coalesce(shape, red, io.with_fused((src, dst), shape))
    src, dst = io.take(accs)
    if red == (0,) and len(shape) == 2 and shape[1] <= MAX_CHANNELS:
        return emit_rows(plan, node, fg, shape, src, dst, io)     # ((N, C): along the rows)
    kept = [d for d in range(len(shape)) if d not in red]

    def full(cidx, ridx):
        it_c, it_r = iter(cidx), iter(ridx)
        return [next(it_r) if d in red else next(it_c) for d in range(len(shape))]

    def channels(g, loops, tid):        # the channels of one thread's share
        b, sg = g.b, g.sg
        c64 = lambda v: sg.const(v, "float64")                      # noqa: E731
        s_slot = g.alloca(F64, "s")
        write_stats = stats_writer(plan, g, stats, count)

        def per_channel(v, c):
            return sg.cast(g.load(plan.access(v, (nc,)), [c]), "float64")

        with loops() as cidx:
            c = cidx[0] if cidx else ir.Constant(I64, 0)

            def over(body):
                with loop_nest(b, [shape[d] for d in red], name="r") as ridx:
                    body(full(cidx, ridx))

            def add64(v):
                b.store(b.fadd(b.load(s_slot, typ=F64), v.v, flags=("reassoc",)), s_slot)

            if training:
                b.store(c64(0).v, s_slot)
                over(lambda idx: add64(sg.cast(g.load(src, idx), "float64")))
                mean = sg.div(Scalar(b.load(s_slot, typ=F64), "float64"), c64(count))
                b.store(c64(0).v, s_slot)

                def dev2(idx):
                    d = sg.sub(sg.cast(g.load(src, idx), "float64"), mean)
                    add64(sg.mul(d, d))
                over(dev2)
                ss = Scalar(b.load(s_slot, typ=F64), "float64")
                write_stats(c, mean, ss)
                var = sg.div(ss, c64(count))
            else:
                mean, var = per_channel(rmean, c), per_channel(rvar, c)
            std = Scalar(sg.call("llvm.sqrt", F64, sg.add(var, c64(node.attrs["eps"])).v),
                         "float64")
            scale = per_channel(w, c) if w is not None else None
            shift = per_channel(bias, c) if bias is not None else None
            if dt == "float32":
                # one product by weight / std per element, as the NumPy implementation of
                # float32 data (exact to ~1e-16 before the rounding to float32): a float64
                # division per element was half the kernel's time
                scale = sg.div(scale, std) if scale is not None else sg.div(c64(1.0), std)
                std = None

            def write(idx):
                y = sg.sub(sg.cast(g.load(src, idx), "float64"), mean)
                if std is not None:
                    y = sg.div(y, std)
                if scale is not None:
                    y = sg.mul(y, scale)
                if shift is not None:
                    y = sg.add(y, shift)
                io.store(g, out, sg.cast(y, dt), dst, idx)
            over(write)

    # channels over the threads: each reads its values two or three times
    parallel_loops(fg, [shape[d] for d in kept], channels,
                   cost=(2 + cost(io.nodes)) * count, rows=True)


# (y's elementwise consumers computed where the last pass stores y: kernel_io.py)
register("batch_norm", "kernel", emit=_emit_batch_norm, check=_check_batch_norm, epilogue=(0,))
register("batch_norm_with_stats", "kernel", emit=_emit_batch_norm, check=_check_batch_norm,
         epilogue=(0,))
