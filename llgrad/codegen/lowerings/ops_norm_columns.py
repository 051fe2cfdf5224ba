"""softmax / log_softmax over a dim that is not the innermost while the innermost kept dim is
unit-stride (cross_entropy of (N, C, H, W) scores over C, softmax(x, dim=1) of an image):
ops_norm's rows would each walk the reduced dim at a large stride, one element at a time.
Here a thread takes the outer kept indices, and for each keeps the row statistics of all the
inner positions at once in stack arrays (the max, the float64 sum of the exps): every pass
walks the reduced dim outside and the inner positions inside, unit stride, vectorised. The
same terms as ops_norm's rows, each sum taken in the order of the reduced index. An inner
extent above MAX_INNER (a segmenter's (N, C, 96, 96) scores: 9216 positions) is split into
tiles of its largest divisor up to MAX_INNER, the tiles a kept dim of their own."""
from .loops import for_range, loop_nest
from . import vecmath
from .parallel import parallel_loops
from .scalar import F64, Scalar

MAX_INNER = 1024        # (the stack arrays: 12 KiB of float32 statistics at most)
MIN_TILE = 64           # (a smaller tile of a longer inner dim: the rows' form instead)


def _tile(n):
    """The inner tile for an inner extent n: n itself up to MAX_INNER, else its largest
    divisor up to MAX_INNER."""
    return n if n <= MAX_INNER else next(t for t in range(MAX_INNER, 0, -1) if n % t == 0)


def fits(node, shape, red, src, dst):
    """Whether the coalesced (shape, red) with Accesses src, dst takes the column form."""
    nd = len(shape)
    return (node.op in ("softmax", "log_softmax") and red and nd - 1 not in red
            and 1 < shape[-1] and (shape[-1] <= MAX_INNER or _tile(shape[-1]) >= MIN_TILE)
            and src.strides[-1] == 1 and dst.strides[-1] == 1
            and all(d < nd - 1 for d in red))


def emit(fg, node, shape, red, src, dst, dt, count):
    t = _tile(shape[-1])
    if t < shape[-1]:           # (the unit-stride inner dim as (tiles, t): both kept)
        shape = tuple(shape[:-1]) + (shape[-1] // t, t)
        src, dst = (a.with_strides(tuple(a.strides[:-1]) + (t, 1)) for a in (src, dst))
    nd = len(shape)
    kept = [d for d in range(nd) if d not in red]
    inner = shape[-1]

    def full(oidx, ridx):
        it_o, it_r = iter(oidx), iter(ridx)
        return [next(it_r) if d in red else next(it_o) for d in range(nd)]

    def body(g, loops, tid):
        b, sg = g.b, g.sg
        et = sg.const(0, dt).v.type
        m_arr = g.alloca(et, "m", count=inner)
        t_arr = g.alloca(et, "t", count=inner)        # (log(s), or s, in dt)
        s_arr = g.alloca(F64, "s", count=inner)
        at = lambda arr, typ, i: b.gep(arr, [i], inbounds=True, source_etype=typ)  # noqa: E731
        get = lambda arr, i: Scalar(b.load(at(arr, et, i), typ=et), dt)            # noqa: E731

        def columns(fn):            # each reduced index outside, the inner positions inside
            with loop_nest(b, [shape[d] for d in red], name="r") as ridx:
                with for_range(b, 0, inner, name="c") as i:
                    fn(i, ridx)

        def each(fn):
            with for_range(b, 0, inner, name="c") as i:
                fn(i)

        with loops() as oidx:
            oidx = list(oidx)
            idx = lambda i, ridx: full(oidx + [i], ridx)        # noqa: E731
            each(lambda i: b.store(sg.const(float("-inf"), dt).v, at(m_arr, et, i)))
            columns(lambda i, r: b.store(sg.maximum(get(m_arr, i), g.load(src, idx(i, r))).v,
                                         at(m_arr, et, i)))
            each(lambda i: b.store(sg.const(0, "float64").v, at(s_arr, F64, i)))
            columns(lambda i, r: g.store(vecmath.exp(sg, sg.sub(g.load(src, idx(i, r)),
                                                                get(m_arr, i))), dst, idx(i, r)))

            def add(i, r):
                cur = b.load(at(s_arr, F64, i), typ=F64)
                e = sg.cast(g.load(dst, idx(i, r)), "float64")
                b.store(b.fadd(cur, e.v), at(s_arr, F64, i))
            columns(add)

            def total(i):
                s = sg.cast(Scalar(b.load(at(s_arr, F64, i), typ=F64), "float64"), dt)
                b.store((vecmath.log(sg, s) if node.op == "log_softmax" else s).v,
                        at(t_arr, et, i))
            each(total)
            if node.op == "softmax":
                columns(lambda i, r: g.store(sg.div(g.load(dst, idx(i, r)), get(t_arr, i)),
                                             dst, idx(i, r)))
            else:
                columns(lambda i, r: g.store(sg.sub(sg.sub(g.load(src, idx(i, r)), get(m_arr, i)),
                                                    get(t_arr, i)), dst, idx(i, r)))

    parallel_loops(fg, [shape[d] for d in kept[:-1]], body, cost=max(1, 3 * count * inner),
                   rows=True)
