"""Lowerings of avg_pool2d and its backward, avg_pool2d_backward (llgrad/ir/ops_nn_more.py),
on max pooling's model (ops_pool2d.py). No padded copy is made: the padding adds nothing.

Forward: the output rows (every (plane, oh) of the (..., OH, OW) result) are split over the
threads. Each output sums its window in registers in row-major order from +0, as the NumPy
impl's passes do (so the float sums are the same), and divides by PyTorch's divisor in the
dtype. For kernels of at most UNROLL positions the window is unrolled: where whole windows
are inside the input (the interior rows, and the interior columns of them, known when the
code is made) there is no bounds test and the divisor is the constant kh * kw (or the
override); elsewhere a position outside is read at the nearest one inside (in bounds, no
branch) and replaced by 0, and the divisor is computed from the window's clipped extent.
Bigger kernels use runtime loops over the window with a test per position.

Backward: the rows of the input gradient (every (plane, h)) are split over the threads, so
each thread writes rows of its own: a row is zeroed, then for each kernel row i (the last
first) whose output row oo = (r + ph - i) / sh exists, each gradient of that output row is
divided by its divisor and added at its kw columns. Per input element the shares are thus
added in the order of the outputs (PyTorch's, and the NumPy impl's reversed passes): the
same float sums. Where the columns' windows cannot overlap (stride >= kernel) the adds are
independent interleaved accesses, and the loop along the row vectorises.

(Why kernels: the decomposition they replace, a window sum over an as_strided view of a
padded copy and a strided_scatter backward, took ~2 ms and ~1 ms for a 2x2 pool of
(32, 32, 32, 32) float32 on one thread; these take ~0.25 ms each, a pass over the data.)"""
import math

from ...ir.graph import Value
from .loops import Access, for_range
from .ops_pool2d import UNROLL, clamp_index, i64_const, interior_outputs, unflatten_index
from .parallel import parallel_range
from .scalar import Scalar, is_float, reg_type
from .table import register


def _check(node):
    x = node.inputs[0]          # (the forward's input, or the backward's gradient)
    if not isinstance(x, Value):
        return "a Python-number operand"
    if not is_float(x.type.dtype) or node.outputs[0].type.dtype != x.type.dtype:
        return "a non-float operand, or a result of another dtype"
    if len(x.type.shape) < 2:
        return "an operand of rank < 2"
    return None


def _min(b, x, y):
    return b.select(b.icmp_signed("<", x, y), x, y)


def _max(b, x, y):
    return b.select(b.icmp_signed(">", x, y), x, y)


def _count(b, o, n, k, stride, pad, include):
    """ir/ops_nn_more.window_count of output o (an i64): the divisor's factor along a dim."""
    start = b.sub(b.mul(o, i64_const(stride)), i64_const(pad))
    end = _min(b, b.add(start, i64_const(k)), i64_const(n + pad))
    if include:
        return b.sub(end, start)
    return b.sub(_min(b, end, i64_const(n)), _max(b, start, i64_const(0)))


class _Geometry:
    """The pool's attributes, and its divisor from the row and column factors (ints where
    known when the code is made, else i64 values)."""

    def __init__(self, attrs, h, w, dt):
        (self.kh, self.kw), (self.sh, self.sw) = attrs["kernel_size"], attrs["stride"]
        self.ph, self.pw = attrs["padding"]
        self.include, self.override = attrs["count_include_pad"], attrs["divisor_override"]
        self.h, self.w, self.dt = h, w, dt

    def row_count(self, b, o):
        """The divisor's factor of output row o (an i64)."""
        return _count(b, o, self.h, self.kh, self.sh, self.ph, self.include)

    def col_count(self, b, c):
        """The divisor's factor of output column c (an i64)."""
        return _count(b, c, self.w, self.kw, self.sw, self.pw, self.include)

    def divisor(self, g, rows, cols):
        """PyTorch's divisor in the dtype (the override, else rows * cols)."""
        if self.override:
            return g.sg.const(float(self.override), self.dt)
        if isinstance(rows, int) and isinstance(cols, int):
            return g.sg.const(rows * cols, self.dt)
        n = g.b.mul(i64_const(rows) if isinstance(rows, int) else rows,
                    i64_const(cols) if isinstance(cols, int) else cols)
        return g.sg.cast(Scalar(n, "int64"), self.dt)


# ---- forward ---------------------------------------------------------------------------------

def _emit_forward(plan, group, fg):
    node = group.root
    x, out = node.inputs[0], node.outputs[0]
    if out.type.numel == 0:
        return
    shape, dt = x.type.shape, x.type.dtype
    lead, (h, w) = shape[:-2], shape[-2:]
    oh, ow = out.type.shape[-2:]
    geo = _Geometry(node.attrs, h, w, dt)
    k = _Windows(plan.access(x, shape), Access(plan.buffers[out], dt, 0, (ow, 1)), geo, ow)
    rows = interior_outputs(oh, h, geo.sh, geo.ph, 1, geo.kh)
    cols = interior_outputs(ow, w, geo.sw, geo.pw, 1, geo.kw)
    fast = geo.kh * geo.kw <= UNROLL

    def body(g, lo, hi, tid):
        b = g.b
        with for_range(b, lo, hi, name="row") as q:
            o = b.urem(q, i64_const(oh))
            lidx = unflatten_index(b, b.udiv(q, i64_const(oh)), lead)
            start = b.sub(b.mul(o, i64_const(geo.sh)), i64_const(geo.ph))
            if not fast:
                k.looped(g, lidx, q, start, geo.row_count(b, o), 0, ow)
            else:
                k.rows(g, lidx, q, o, start, rows, cols)

    # threads over rows of outputs; a row's work: its windows' elements
    parallel_range(fg, math.prod(lead) * oh, body, work_per_iter=ow * geo.kh * geo.kw)


class _Windows:
    """Outputs [c0, c1) of one output row (plane-row q, its windows' rows from `start`,
    rcount: the divisor's row factor), unrolled or looped (see the module)."""

    def __init__(self, src, dst, geo, ow):
        self.src, self.dst, self.geo, self.ow = src, dst, geo, ow

    def rows(self, g, lidx, q, o, start, inner_rows, cols):
        """Output row o unrolled, without checks where its windows are inside the input
        (o in inner_rows, and the columns in cols)."""
        b, geo, ow = g.b, self.geo, self.ow
        inside = b.and_(b.icmp_signed(">=", o, i64_const(inner_rows[0])),
                        b.icmp_signed("<", o, i64_const(inner_rows[1])))
        with b.if_else(inside) as (then, other):
            with then:          # checks only at the row's ends
                self.unrolled(g, lidx, q, start, geo.kh, 0, cols[0], check_rows=False)
                self.unrolled(g, lidx, q, start, geo.kh, *cols, check_cols=False,
                              check_rows=False)
                self.unrolled(g, lidx, q, start, geo.kh, cols[1], ow, check_rows=False)
            with other:
                self.unrolled(g, lidx, q, start, geo.row_count(b, o), 0, ow)

    def unrolled(self, g, lidx, q, start, rcount, c0, c1, check_rows=True, check_cols=True):
        if c0 >= c1:
            return
        b, sg, geo = g.b, g.sg, self.geo
        zero = sg.const(0, geo.dt)
        rows = []
        for i in range(geo.kh):
            r = b.add(start, i64_const(i))
            ok = b.icmp_unsigned("<", r, i64_const(geo.h)) if check_rows else None   # (r < 0 too)
            rows.append((ok, clamp_index(b, r, geo.h) if check_rows else r))
        with for_range(b, c0, c1, name="ow") as c:
            col0 = b.sub(b.mul(c, i64_const(geo.sw)), i64_const(geo.pw))
            acc = zero          # (from +0, as the reference: an all -0 window sums to +0)
            for rok, r in rows:
                for j in range(geo.kw):
                    col = b.add(col0, i64_const(j))
                    v = g.load(self.src, lidx + [r, clamp_index(b, col, geo.w) if check_cols
                                                 else col])
                    ok = rok
                    if check_cols:
                        cok = b.icmp_unsigned("<", col, i64_const(geo.w))
                        ok = cok if ok is None else b.and_(ok, cok)
                    acc = sg.add(acc, v if ok is None else sg.select(ok, v, zero))
            div = geo.divisor(g, rcount, geo.col_count(b, c) if check_cols else geo.kw)
            g.store(sg.div(acc, div), self.dst, [q, c])

    def looped(self, g, lidx, q, start, rcount, c0, c1):
        b, sg, geo = g.b, g.sg, self.geo
        slot = g.alloca(reg_type(geo.dt), "acc")
        with for_range(b, c0, c1, name="owc") as c:
            col0 = b.sub(b.mul(c, i64_const(geo.sw)), i64_const(geo.pw))
            b.store(sg.const(0, geo.dt).v, slot)
            with for_range(b, 0, geo.kh, name="ki") as i:
                r = b.add(start, i)
                with b.if_then(b.icmp_unsigned("<", r, i64_const(geo.h))):    # (r < 0: false)
                    with for_range(b, 0, geo.kw, name="kj") as j:
                        col = b.add(col0, j)
                        with b.if_then(b.icmp_unsigned("<", col, i64_const(geo.w))):
                            acc = Scalar(b.load(slot, typ=slot.allocated_type), geo.dt)
                            v = g.load(self.src, lidx + [r, col])
                            b.store(sg.add(acc, v).v, slot)
            acc = Scalar(b.load(slot, typ=slot.allocated_type), geo.dt)
            div = geo.divisor(g, rcount, geo.col_count(b, c))
            g.store(sg.div(acc, div), self.dst, [q, c])


# ---- backward --------------------------------------------------------------------------------

def _emit_backward(plan, group, fg):
    node = group.root
    grad, out = node.inputs[0], node.outputs[0]
    if out.type.numel == 0:
        return
    shape, dt = out.type.shape, out.type.dtype
    lead, (h, w) = shape[:-2], shape[-2:]
    oh, ow = grad.type.shape[-2:]
    geo = _Geometry(node.attrs, h, w, dt)
    src = plan.access(grad, grad.type.shape)
    dst = Access(plan.buffers[out], dt, 0, (w, 1))          # over (plane-row, column)
    cols = interior_outputs(ow, w, geo.sw, geo.pw, 1, geo.kw)
    zero = fg.sg.const(0, dt)

    def body(g, lo, hi, tid):
        b = g.b
        with for_range(b, lo, hi, name="row") as q:
            r = b.urem(q, i64_const(h))
            lidx = unflatten_index(b, b.udiv(q, i64_const(h)), lead)
            with for_range(b, 0, w, name="z") as c:
                g.store(zero, dst, [q, c])
            with for_range(b, 0, geo.kh, name="ki") as ii:
                # kernel row i = kh - 1 - ii: the output rows in increasing order
                t = b.add(b.add(r, i64_const(geo.ph - geo.kh + 1)), ii, name="t")   # oo * sh
                oo = b.udiv(_max(b, t, i64_const(0)), i64_const(geo.sh))
                ok = b.and_(b.icmp_signed(">=", t, i64_const(0)),
                            b.and_(b.icmp_signed("==", b.mul(oo, i64_const(geo.sh)), t),
                                   b.icmp_signed("<", oo, i64_const(oh))))
                with b.if_then(ok):
                    rcount = geo.row_count(b, oo)
                    at = lidx + [oo]
                    _spread(g, src, dst, geo, at, q, rcount, 0, cols[0], True)
                    _spread(g, src, dst, geo, at, q, rcount, *cols, False)
                    _spread(g, src, dst, geo, at, q, rcount, cols[1], ow, True)

    # threads over input rows; a row's work: zeroing it and the output rows that reach it
    reach = -(-geo.kh // geo.sh)
    parallel_range(fg, math.prod(lead) * h, body, work_per_iter=w + reach * ow * geo.kw)


def _spread(g, src, dst, geo, at, q, rcount, c0, c1, check):
    """Outputs [c0, c1) of the output row `at`, in order: each gradient / its divisor
    added at its window's columns of input row q. check: a column outside the input adds 0
    at the nearest one inside."""
    if c0 >= c1:
        return
    b, sg = g.b, g.sg
    with for_range(b, c0, c1, name="oc") as c:
        div = geo.divisor(g, rcount, geo.col_count(b, c) if check else geo.kw)
        share = sg.div(g.load(src, at + [c]), div)
        col0 = b.sub(b.mul(c, i64_const(geo.sw)), i64_const(geo.pw))
        if geo.kw > UNROLL:         # (a wide kernel: its columns in a loop, not unrolled)
            with for_range(b, 0, geo.kw, name="kj") as j:
                _add(g, dst, geo, q, b.add(col0, j), share, check)
        else:
            for j in range(geo.kw):
                _add(g, dst, geo, q, b.add(col0, i64_const(j)), share, check)


def _add(g, dst, geo, q, col, v, check):
    """dst[q, col] += v (check: 0 at the nearest column inside where col is outside)."""
    b, sg = g.b, g.sg
    if check:
        v = sg.select(b.icmp_unsigned("<", col, i64_const(geo.w)), v, sg.const(0, geo.dt))
        col = clamp_index(b, col, geo.w)
    g.store(sg.add(g.load(dst, [q, col]), v), dst, [q, col])


register("avg_pool2d", "kernel", emit=_emit_forward, check=_check)
register("avg_pool2d_backward", "kernel", emit=_emit_backward, check=_check)
