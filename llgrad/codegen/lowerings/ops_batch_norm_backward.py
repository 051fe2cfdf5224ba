"""Lowering of batch_norm_backward (ir/ops_batch_norm.py): one kernel whose threads share the
channels, three passes over each channel's elements, the NumPy implementation's formulas.

Per channel, m elements over dims (0, 2, ...):
  pass 1: mean = sum(x) / m in float64, rounded to the data's dtype;
  pass 2: xc = x - mean (in the dtype), S0 = sum(xc^2), S1 = sum(g), S2 = sum(g * xc) in
          float64; r = 1 / sqrt(S0 / m + eps) in the dtype;
  where the sums and the weight are finite:
          grad_weight = r * S2, grad_bias = S1, and with a = r * w (r alone without a weight)
          pass 3: grad_input = ((xc * c0 - c1) + g) * a, c0 = -(r^2) S2 / m, c1 = S1 / m;
  else (NaN, inf, an overflow) the decomposition's operations in its order and dtype, as
          the NumPy implementation's exact block does, so special values come out the same:
          xhat = xc * r, gxh = g * w, m1 = sum(gxh) / m, m2 = sum(gxh * xhat) / m,
          grad_input = r * ((gxh - m1) - xhat * m2), grad_weight = sum(g * xhat).

The gradient may be computed where it is loaded (passes 2 and 3) instead of read: relu's
backward, le + masked_fill, fused in as a prologue (kernel_io.py), so the masked gradient is
never written.

Why not the decomposition (mean, sub, mul, mean, rsqrt, ... as the rule reads): the scheduler
makes it eleven loops and three full-size scratch arrays, 3x PyTorch's fused backward.

An (N, C) batch (BatchNorm1d's) goes along the rows instead (_rows): each channel is a column
there, a stride of C apart, and channel by channel nothing vectorised. The threads split the
channels; each pass walks the rows with the channels as the inner, contiguous loop, keeping
every channel's sums and constants in stack arrays; a channel whose sums are not finite then
takes the exact path on its own column."""
from llvmlite import ir

from ...ir.geometry import contiguous_strides
from ...ir.graph import Value
from .kernel_io import KernelIO
from .loops import Access, for_range, loop_nest
from .ops_norm import _coalesce
from .parallel import cost, parallel_loops, parallel_range
from .scalar import F64, I64, Scalar, is_float, reg_type
from .table import register


def _check(node):
    g, x, w = node.inputs
    if not (isinstance(g, Value) and isinstance(x, Value)):
        return "a Python-number operand"
    dt = x.type.dtype
    if not is_float(dt) or g.type.dtype != dt or tuple(g.type.shape) != tuple(x.type.shape):
        return "operands of other dtypes or shapes"
    if w is not None and not (isinstance(w, Value) and w.type.dtype == dt):
        return "a weight of another dtype"
    if len(x.type.shape) < 2 or any(o.type.dtype != dt for o in node.outputs):
        return "an operand of rank < 2 or results of another dtype"
    return None


def _zeros(fg, accs, n, dt):
    """Each Access of accs (n elements) set to 0 (no elements per channel: no sums)."""
    zero = fg.sg.const(0, dt)
    with for_range(fg.b, 0, n, name="z") as i:
        for acc in accs:
            fg.store(zero, acc, [i])


def _emit(plan, group, fg):
    node = group.root
    gv, x, w = node.inputs
    gx_v, gw_v, gb_v = node.outputs
    shape, dt = x.type.shape, x.type.dtype
    nd, nc = len(shape), shape[1]
    red = [0] + list(range(2, nd))
    m = x.type.numel // nc if nc else 0
    gw_acc = Access(plan.buffers[gw_v], dt, 0, (1,))
    gb_acc = Access(plan.buffers[gb_v], dt, 0, (1,))
    if m == 0:
        _zeros(fg, (gw_acc, gb_acc), nc, dt)
        return
    io = KernelIO(plan, group)      # (relu's backward before it: computed at its loads)
    src = (plan.access(x, shape), io.operand(gv, shape),
           Access(plan.buffers[gx_v], dt, 0, contiguous_strides(shape)))
    shape, red, accs = _coalesce(shape, red, io.with_fused(src, shape))
    src = io.take(accs)
    kept = [d for d in range(len(shape)) if d not in red]
    x_acc, g_acc, gx_acc = src
    w_acc = plan.access(w, (nc,)) if w is not None else None
    if red == (0,) and len(shape) == 2 and shape[1] <= MAX_ROW_CHANNELS:
        return _rows(node, fg, shape, src, w_acc, (gw_acc, gb_acc), io)

    def channels(fgt, loops, tid):
        b, sg = fgt.b, fgt.sg
        slots = [fgt.alloca(F64, f"s{k}") for k in range(3)]
        c64 = lambda v: sg.const(v, "float64")                      # noqa: E731
        to64 = lambda s: sg.cast(s, "float64")                      # noqa: E731
        cdt = lambda v: sg.const(v, dt)                             # noqa: E731
        load_g = lambda idx: io.load(fgt, gv, g_acc, idx)           # noqa: E731

        def over(body):
            with loop_nest(b, [shape[d] for d in red], name="r") as ridx:
                it_c, it_r = iter(cidx), iter(ridx)
                body([next(it_r) if d in red else next(it_c) for d in range(len(shape))])

        def zero(*ks):
            for k in ks:
                b.store(c64(0).v, slots[k])

        def add(k, v):              # (reassociated: the sums vectorise)
            b.store(b.fadd(b.load(slots[k], typ=F64), v.v, flags=("reassoc",)), slots[k])

        def total(k):
            return Scalar(b.load(slots[k], typ=F64), "float64")

        def finite(v):              # (v - v is 0 for a finite v, NaN otherwise)
            return b.fcmp_ordered("==", b.fsub(v.v, v.v), ir.Constant(v.v.type, 0.0))

        with loops() as cidx:
            c = cidx[0] if cidx else ir.Constant(I64, 0)
            zero(0)
            over(lambda idx: add(0, to64(fgt.load(x_acc, idx))))
            mean = sg.cast(sg.div(total(0), c64(m)), dt)
            zero(0, 1, 2)

            def sums(idx):
                xc = to64(sg.sub(fgt.load(x_acc, idx), mean))
                gval = to64(load_g(idx))
                add(0, sg.mul(xc, xc))
                add(1, gval)
                add(2, sg.mul(gval, xc))
            over(sums)
            s0, s1, s2 = total(0), total(1), total(2)
            var = sg.cast(sg.div(s0, c64(m)), dt)
            r = sg.div(cdt(1.0), Scalar(sg.call("llvm.sqrt", reg_type(dt),
                                                sg.add(var, cdt(node.attrs["eps"])).v), dt))
            wc = fgt.load(w_acc, [c]) if w_acc is not None else None
            ok = b.and_(b.and_(finite(s0), finite(s1)), finite(s2))
            if wc is not None:
                ok = b.and_(ok, finite(wc))
            with b.if_else(ok) as (fast, exact):
                with fast:
                    fgt.store(sg.cast(sg.mul(to64(r), s2), dt), gw_acc, [c])
                    fgt.store(sg.cast(s1, dt), gb_acc, [c])
                    r64 = to64(r)
                    c0 = sg.cast(sg.mul(sg.neg(sg.mul(r64, r64)), sg.div(s2, c64(m))), dt)
                    c1 = sg.cast(sg.div(s1, c64(m)), dt)
                    a = sg.cast(sg.mul(r64, to64(wc)), dt) if wc is not None else r

                    def write(idx):
                        xc = sg.sub(fgt.load(x_acc, idx), mean)
                        v = sg.add(sg.sub(sg.mul(xc, c0), c1), load_g(idx))
                        fgt.store(sg.mul(v, a), gx_acc, idx)
                    over(write)
                with exact:
                    _exact(fgt, over, (x_acc, load_g, gx_acc), mean, r, wc, m, slots,
                           (gw_acc, gb_acc, c), s1)

    parallel_loops(fg, [shape[d] for d in kept], channels, cost=(2 + cost(io.nodes)) * m,
                   rows=True)


def _exact(fgt, over, accs, mean, r, wc, m, slots, outs, s1):
    """The decomposition's operations for one channel (see the module's docstring); accs:
    x's Access, load_g(idx) -> the gradient, grad_input's Access."""
    b, sg = fgt.b, fgt.sg
    x_acc, load_g, gx_acc = accs
    gw_acc, gb_acc, c = outs
    dt = mean.dt
    to64 = lambda s: sg.cast(s, "float64")                          # noqa: E731

    def parts(idx):
        xhat = sg.mul(sg.sub(fgt.load(x_acc, idx), mean), r)
        gval = load_g(idx)
        return xhat, gval, (sg.mul(gval, wc) if wc is not None else gval)

    def add(k, v):
        b.store(b.fadd(b.load(slots[k], typ=F64), to64(v).v, flags=("reassoc",)), slots[k])

    for k in range(3):
        b.store(ir.Constant(F64, 0.0), slots[k])

    def sums(idx):
        xhat, gval, gxh = parts(idx)
        add(0, gxh)
        add(1, sg.mul(gxh, xhat))
        add(2, sg.mul(gval, xhat))
    over(sums)
    total = [Scalar(b.load(slots[k], typ=F64), "float64") for k in range(3)]
    mf = sg.const(m, "float64")
    m1, m2 = (sg.cast(sg.div(total[k], mf), dt) for k in (0, 1))
    fgt.store(sg.cast(total[2], dt), gw_acc, [c])
    fgt.store(sg.cast(s1, dt), gb_acc, [c])

    def write(idx):
        xhat, _, gxh = parts(idx)
        fgt.store(sg.mul(r, sg.sub(sg.sub(gxh, m1), sg.mul(xhat, m2))), gx_acc, idx)
    over(write)


MAX_ROW_CHANNELS = 2048  # (seven float64 arrays of them on a worker's stack: 112 KiB)


def _rows(node, fg, shape, accs, w_acc, outs, io):
    """The kernel over a coalesced (rows, channels) walk: the three passes along the rows
    (the formulas of _emit's, the sums in row order), then _exact for each channel whose
    sums or weight are not finite (the gradient read through KernelIO io)."""
    x_acc, g_acc, gx_acc = accs
    gv = node.inputs[0]
    gw_acc, gb_acc = outs
    dt = node.inputs[1].type.dtype
    rows, nc = shape
    eps = node.attrs["eps"]

    def body(g, lo, hi, tid):
        b, sg = g.b, g.sg
        c64 = lambda v: sg.const(v, "float64")                      # noqa: E731
        to64 = lambda s: sg.cast(s, "float64")                      # noqa: E731
        cdt = lambda v: sg.const(v, dt)                             # noqa: E731
        load_g = lambda idx: io.load(g, gv, g_acc, idx)             # noqa: E731
        names = ("mean", "s0", "s1", "s2", "c0", "c1", "a")
        arr = {k: g.alloca(F64, f"bn_{k}", count=nc) for k in names}
        slots = [g.alloca(F64, f"s{k}") for k in range(3)]

        def at(k, c):
            return b.gep(arr[k], [c], inbounds=True, source_etype=F64)

        def get(k, c, as_dt=False):
            v = Scalar(b.load(at(k, c), typ=F64), "float64")
            return sg.cast(v, dt) if as_dt else v

        def put(k, c, v):
            b.store(to64(v).v, at(k, c))

        def channels():
            return for_range(b, lo, hi, name="c")

        def each_row():
            return for_range(b, 0, rows, name="r")

        def finite(v):              # (v - v is 0 for a finite v, NaN otherwise)
            return b.fcmp_ordered("==", b.fsub(v.v, v.v), ir.Constant(v.v.type, 0.0))

        with channels() as c:
            for k in ("mean", "s0", "s1", "s2"):
                put(k, c, c64(0))
        with each_row() as r:
            with channels() as c:
                put("mean", c, sg.add(get("mean", c), to64(g.load(x_acc, [r, c]))))
        with channels() as c:       # (the mean rounded to the dtype, held as float64)
            put("mean", c, sg.cast(sg.div(get("mean", c), c64(rows)), dt))
        with each_row() as r:
            with channels() as c:
                xc = to64(sg.sub(g.load(x_acc, [r, c]), get("mean", c, True)))
                gval = to64(load_g([r, c]))
                put("s0", c, sg.add(get("s0", c), sg.mul(xc, xc)))
                put("s1", c, sg.add(get("s1", c), gval))
                put("s2", c, sg.add(get("s2", c), sg.mul(gval, xc)))

        def rstd(c):
            var = sg.cast(sg.div(get("s0", c), c64(rows)), dt)
            return sg.div(cdt(1.0), Scalar(sg.call("llvm.sqrt", reg_type(dt),
                                                   sg.add(var, cdt(eps)).v), dt))

        def weight(c):
            return g.load(w_acc, [c]) if w_acc is not None else None

        with channels() as c:
            s1, s2, r64 = get("s1", c), get("s2", c), to64(rstd(c))
            g.store(sg.cast(sg.mul(r64, s2), dt), gw_acc, [c])
            g.store(sg.cast(s1, dt), gb_acc, [c])
            put("c0", c, sg.cast(sg.mul(sg.neg(sg.mul(r64, r64)), sg.div(s2, c64(rows))), dt))
            put("c1", c, sg.cast(sg.div(s1, c64(rows)), dt))
            wc = weight(c)
            put("a", c, sg.cast(sg.mul(r64, to64(wc)), dt) if wc is not None else rstd(c))
        with each_row() as r:
            with channels() as c:
                xc = sg.sub(g.load(x_acc, [r, c]), get("mean", c, True))
                v = sg.add(sg.sub(sg.mul(xc, get("c0", c, True)), get("c1", c, True)),
                           load_g([r, c]))
                g.store(sg.mul(v, get("a", c, True)), gx_acc, [r, c])
        with channels() as c:       # (a channel of NaN, inf or an overflow: exactly)
            ok = b.and_(b.and_(finite(get("s0", c)), finite(get("s1", c))),
                        finite(get("s2", c)))
            wc = weight(c)
            if wc is not None:
                ok = b.and_(ok, finite(wc))
            with b.if_then(b.not_(ok)):
                def over(fn, c=c):
                    with each_row() as r:
                        fn([r, c])
                _exact(g, over, (x_acc, load_g, gx_acc), get("mean", c, True), rstd(c), wc,
                       rows, slots, (gw_acc, gb_acc, c), get("s1", c))

    parallel_range(fg, nc, body, work_per_iter=3 * rows)


# (its gradient's elementwise producer, relu's backward, computed at its loads: kernel_io.py)
register("batch_norm_backward", "kernel", emit=_emit, check=_check, prologue=(0,))
