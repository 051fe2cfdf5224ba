"""batch_norm and batch_norm_with_stats (ops_norm.py) of an (N, C) batch, row by row:
BatchNorm1d's common input.

Why: the general emit goes channel by channel, each channel's values a column a stride of C
apart; nothing vectorised, and on a (256, 128) batch the kernel took 5x torch's forward. Here
the threads split the channels, and each walks the rows with its channels as the inner,
contiguous loop, keeping every channel's sums in stack arrays: the same formulas as the
general emit (float64 sums in two passes, the float32 product by weight / std), the sums
in row order."""
from .loops import Access, for_range
from .parallel import parallel_range
from .scalar import F64, Scalar

MAX_CHANNELS = 4096     # (two float64 arrays of them on a worker's stack: 64 KiB)


def operands(node):
    """(x, weight, bias, running_mean, running_var, training, stats) of a batch_norm node,
    or of a batch_norm_with_stats one (training, no running statistics; stats: the Values
    its kernel writes the batch's mean and unbiased variance to, else ())."""
    if node.op == "batch_norm_with_stats":
        return tuple(node.inputs[:3]) + (None, None, True, tuple(node.outputs[1:3]))
    return tuple(node.inputs[:5]) + (bool(node.attrs.get("training")), ())


def stats_writer(plan, g, stats, count):
    """write(c, mean, ss): channel c's batch mean and unbiased variance ss / (count - 1)
    (float64 Scalars in, rounded to the outputs' dtype) into the Values stats; a no-op
    without them."""
    if not stats:
        return lambda c, mean, ss: None
    dt = stats[0].type.dtype
    mean_at, var_at = (Access(plan.buffers[v], dt, 0, (1,)) for v in stats)

    def write(c, mean, ss):
        g.store(g.sg.cast(mean, dt), mean_at, [c])
        g.store(g.sg.cast(g.sg.div(ss, g.sg.const(count - 1, "float64")), dt), var_at, [c])
    return write


def emit_rows(plan, node, fg, shape, src, dst, io):
    """The kernel of batch_norm `node` over a coalesced (rows, channels) walk of its input
    (Access src) into its output (Access dst, written through KernelIO io)."""
    x, w, bias, rmean, rvar, training, stats = operands(node)
    dt = x.type.dtype
    rows, nc = shape

    def body(g, lo, hi, tid):
        b, sg = g.b, g.sg
        c64 = lambda v: sg.const(v, "float64")                      # noqa: E731
        first = g.alloca(F64, "bn_first", count=nc)     # sums, then the means
        second = g.alloca(F64, "bn_second", count=nc)   # squares, then 1/std or std

        def at(p, c):
            return b.gep(p, [c], inbounds=True, source_etype=F64)

        def get(p, c):
            return Scalar(b.load(at(p, c), typ=F64), "float64")

        def put(p, c, v):
            b.store(v.v, at(p, c))

        def value(r, c):
            return sg.cast(g.load(src, [r, c]), "float64")

        def per_channel(v, c):
            return sg.cast(g.load(plan.access(v, (nc,)), [c]), "float64")

        def channels():
            return for_range(b, lo, hi, name="c")

        def each_row():
            return for_range(b, 0, rows, name="r")

        write_stats = stats_writer(plan, g, stats, rows)

        if training:
            with channels() as c:
                put(first, c, c64(0))
                put(second, c, c64(0))
            with each_row() as r:
                with channels() as c:
                    put(first, c, sg.add(get(first, c), value(r, c)))
            with channels() as c:
                put(first, c, sg.div(get(first, c), c64(rows)))
            with each_row() as r:
                with channels() as c:
                    d = sg.sub(value(r, c), get(first, c))
                    put(second, c, sg.add(get(second, c), sg.mul(d, d)))
            with channels() as c:
                write_stats(c, get(first, c), get(second, c))
                put(second, c, sg.div(get(second, c), c64(rows)))
        else:
            with channels() as c:
                put(first, c, per_channel(rmean, c))
                put(second, c, per_channel(rvar, c))
        with channels() as c:
            std = Scalar(sg.call("llvm.sqrt", F64,
                                 sg.add(get(second, c), c64(node.attrs["eps"])).v), "float64")
            if dt == "float32":     # (one product per element, as ops_norm's emit)
                put(second, c, sg.div(per_channel(w, c), std) if w is not None else
                    sg.div(c64(1.0), std))
            else:
                put(second, c, std)
        with each_row() as r:
            with channels() as c:
                y = sg.sub(value(r, c), get(first, c))
                if dt == "float32":
                    y = sg.mul(y, get(second, c))
                else:
                    y = sg.div(y, get(second, c))
                    if w is not None:
                        y = sg.mul(y, per_channel(w, c))
                if bias is not None:
                    y = sg.add(y, per_channel(bias, c))
                io.store(g, node.outputs[0], sg.cast(y, dt), dst, [r, c])

    parallel_range(fg, nc, body, work_per_iter=3 * rows)
