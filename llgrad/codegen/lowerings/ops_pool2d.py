"""Lowerings of max_pool2d_with_indices and its backward (llgrad/ir/ops_pool.py). (pool.py
beside this file is the thread pool, not pooling.)

Forward: the output rows (every (plane, oh) of the (..., OH, OW) result) are split over the
threads. Each output reads its window in row-major order, as the reference does: the
best value and its flat index r * W + c stay in registers, and an element replaces them
when greater or NaN. For kernels of at most UNROLL positions the window is unrolled; where
whole windows are inside the input (the interior rows, and the interior columns of them,
known when the code is made) there is no bounds test at all and the loop along the row
vectorises; elsewhere a position outside is read at the nearest one inside (in bounds, no
branch) and never taken, the best starting from the dtype's lowest value at the window's
first position inside (PyTorch's start). No padded copy is made. (Updating the row in
memory once per kernel offset instead measured ~10x slower on 2x2 windows: each pass
reloads what the previous one stored, partly by its scalar tail.) Bigger kernels use
runtime loops over the window with a test per position.

Backward: the input planes are split over the threads; each plane is zeroed and then every
gradient element of the plane is added at its index, in the order of the outputs (the
reference's np.add.at order, so float sums round the same). An index outside the plane (a
window that read nothing) is skipped, as the reference drops it."""
import math

from llvmlite import ir

from ...ir.graph import Value
from ...ir.ops_pool import valid_outputs
from .loops import Access, for_range
from .parallel import parallel_range
from .scalar import I64, Scalar, is_float, is_unsigned, reg_type
from .table import register


def i64_const(v):
    """v as an i64 constant."""
    return ir.Constant(I64, v)


def _check_forward(node):
    x = node.inputs[0]
    if not isinstance(x, Value):
        return "a Python-number operand"
    if x.type.dtype == "bool":
        return "a bool operand"
    if len(x.type.shape) < 2:
        return "an operand of rank < 2"
    return None


def _check_backward(node):
    grad, _, idx = node.inputs[:3]
    if not (isinstance(grad, Value) and isinstance(idx, Value)):
        return "a Python-number operand"
    if idx.type.dtype != "int64" or not is_float(grad.type.dtype):
        return "non-int64 indices or a non-float gradient"
    if grad.type.dtype != node.outputs[0].type.dtype:
        return "a result of another dtype than the gradient"
    return None


def _lowest(dt, sg):
    if is_float(dt):
        return sg.const(float("-inf"), dt)
    t = reg_type(dt)
    return Scalar(ir.Constant(t, 0 if is_unsigned(dt) else -(1 << (t.width - 1))), dt)


def unflatten_index(b, p, lead):
    """The indices over the dims `lead` of the flat (C-order) position p."""
    idx = []
    for d in range(len(lead) - 1, 0, -1):
        idx.insert(0, b.urem(p, i64_const(lead[d])))
        p = b.udiv(p, i64_const(lead[d]))
    return [p] + idx if lead else []


def _first_inside(b, start, dilation):
    """start moved past the padding in steps of dilation (PyTorch's window start)."""
    neg = b.sub(i64_const(0), start)
    steps = b.udiv(b.add(neg, i64_const(dilation - 1)), i64_const(dilation))
    return b.select(b.icmp_signed("<", start, i64_const(0)),
                    b.add(start, b.mul(steps, i64_const(dilation))), start)


UNROLL = 64     # kernels of at most this many offsets: the window's loads unrolled


def interior_outputs(o, n, stride, pad, dilation, k):
    """[lo, hi): the outputs along a dim whose whole window is inside the input."""
    lo, hi = 0, o
    for i in range(k):
        a, b = valid_outputs(o, n, stride, pad, i * dilation)
        lo, hi = max(lo, a), min(hi, b)
    return lo, max(lo, hi)


def _emit_forward(plan, group, fg):
    node = group.root
    x = node.inputs[0]
    vals, idxs = node.outputs
    if vals.type.numel == 0:
        return
    a = node.attrs
    geo = (a["kernel_size"], a["stride"], a["padding"], a["dilation"])
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = geo
    shape, dt = x.type.shape, x.type.dtype
    lead, (h, w) = shape[:-2], shape[-2:]
    oh, ow = vals.type.shape[-2:]
    k = _Kernel(plan.access(x, shape), Access(plan.buffers[vals], dt, 0, (ow, 1)),
                Access(plan.buffers[idxs], "int64", 0, (ow, 1)), geo, h, w, dt)
    rows = interior_outputs(oh, h, sh, ph, dh, kh)
    cols = interior_outputs(ow, w, sw, pw, dw, kw)
    fast = kh * kw <= UNROLL

    def body(g, lo, hi, tid):
        b = g.b
        with for_range(b, lo, hi, name="row") as q:
            o = b.urem(q, i64_const(oh))
            lidx = unflatten_index(b, b.udiv(q, i64_const(oh)), lead)
            start = b.sub(b.mul(o, i64_const(sh)), i64_const(ph))
            if not fast:
                k.looped(g, lidx, q, start, 0, ow)
            else:
                inside = b.and_(b.icmp_signed(">=", o, i64_const(rows[0])),
                                b.icmp_signed("<", o, i64_const(rows[1])))
                with b.if_else(inside) as (then, other):
                    with then:          # checks only at the row's ends
                        k.unrolled(g, lidx, q, start, 0, cols[0], check_rows=False)
                        k.unrolled(g, lidx, q, start, *cols, check_cols=False,
                                   check_rows=False)
                        k.unrolled(g, lidx, q, start, cols[1], ow, check_rows=False)
                    with other:
                        k.unrolled(g, lidx, q, start, 0, ow)

    # threads over rows of outputs; a row's work: its windows' elements
    parallel_range(fg, math.prod(lead) * oh, body, work_per_iter=ow * kh * kw)


class _Kernel:
    """Outputs [c0, c1) of one output row (plane-row q, its windows' rows from `start`),
    two ways. unrolled: the window's positions unrolled, the best value and index in
    registers; a position outside the input is read at the nearest one inside (in bounds,
    no branch) and never taken, and the checks are left out where the windows are inside
    (then the loop along the row vectorises). looped (big kernels): runtime loops over the
    kernel, each position tested against the input's bounds."""

    def __init__(self, src, dst_v, dst_i, geo, h, w, dt):
        self.src, self.dst_v, self.dst_i = src, dst_v, dst_i
        (self.kh, self.kw), (_, self.sw), (_, self.pw), (self.dh, self.dw) = geo
        self.h, self.w, self.dt = h, w, dt

    def _take(self, sg, v, best):
        take = sg.cmp(">", v, best).v
        if is_float(self.dt):       # NaN wins over anything, the last one of a window
            take = sg.b.or_(take, sg.isnan(v))
        return take

    def _start(self, b, start, col0):
        """A window's first position inside the input, and the dtype's lowest value."""
        first = _first_inside(b, start, self.dh)
        return b.add(b.mul(first, i64_const(self.w)), _first_inside(b, col0, self.dw))

    def unrolled(self, g, lidx, q, start, c0, c1, check_rows=True, check_cols=True):
        if c0 >= c1:
            return
        b, sg = g.b, g.sg
        rows = []
        for i in range(self.kh):
            r = b.add(start, i64_const(i * self.dh))
            ok = b.icmp_unsigned("<", r, i64_const(self.h)) if check_rows else None   # (r < 0 too)
            rows.append((r, ok, clamp_index(b, r, self.h) if check_rows else r))
        with for_range(b, c0, c1, name="ow") as c:
            col0 = b.sub(b.mul(c, i64_const(self.sw)), i64_const(self.pw))
            best = at = None
            if check_rows or check_cols:
                best, at = _lowest(self.dt, sg), self._start(b, start, col0)
            for r, rok, rc in rows:
                rw = b.mul(r, i64_const(self.w))
                for j in range(self.kw):
                    col = b.add(col0, i64_const(j * self.dw))
                    cok = b.icmp_unsigned("<", col, i64_const(self.w)) if check_cols else None
                    v = g.load(self.src, lidx + [rc, clamp_index(b, col, self.w) if check_cols
                                                 else col])
                    pos = b.add(rw, col)
                    if best is None:
                        best, at = v, pos
                        continue
                    take = self._take(sg, v, best)
                    for ok in (rok, cok):
                        take = take if ok is None else b.and_(take, ok)
                    best, at = sg.select(take, v, best), b.select(take, pos, at)
            g.store(best, self.dst_v, [q, c])
            g.store(Scalar(at, "int64"), self.dst_i, [q, c])

    def looped(self, g, lidx, q, start, c0, c1):
        b, sg = g.b, g.sg
        best_slot = g.alloca(reg_type(self.dt), "best")
        at_slot = g.alloca(I64, "at")
        with for_range(b, c0, c1, name="owc") as c:
            col0 = b.sub(b.mul(c, i64_const(self.sw)), i64_const(self.pw))
            b.store(_lowest(self.dt, sg).v, best_slot)
            b.store(self._start(b, start, col0), at_slot)
            with for_range(b, 0, self.kh, name="ki") as i:
                r = b.add(start, b.mul(i, i64_const(self.dh)))
                with b.if_then(b.icmp_unsigned("<", r, i64_const(self.h))):    # (r < 0: false)
                    with for_range(b, 0, self.kw, name="kj") as j:
                        col = b.add(col0, b.mul(j, i64_const(self.dw)))
                        with b.if_then(b.icmp_unsigned("<", col, i64_const(self.w))):
                            v = g.load(self.src, lidx + [r, col])
                            best = Scalar(b.load(best_slot, typ=best_slot.allocated_type),
                                          self.dt)
                            take = self._take(sg, v, best)
                            b.store(b.select(take, v.v, best.v), best_slot)
                            pos = b.add(b.mul(r, i64_const(self.w)), col)
                            b.store(b.select(take, pos, b.load(at_slot, typ=I64)), at_slot)
            g.store(Scalar(b.load(best_slot, typ=best_slot.allocated_type), self.dt),
                    self.dst_v, [q, c])
            g.store(Scalar(b.load(at_slot, typ=I64), "int64"), self.dst_i, [q, c])


def clamp_index(b, i, n):
    """i moved into [0, n)."""
    i = b.select(b.icmp_signed("<", i, i64_const(0)), i64_const(0), i)
    return b.select(b.icmp_signed(">", i, i64_const(n - 1)), i64_const(n - 1), i)


def _emit_backward(plan, group, fg):
    node = group.root
    grad, _, idx = node.inputs[:3]
    out = node.outputs[0]
    if out.type.numel == 0:
        return
    shape, dt = out.type.shape, out.type.dtype
    lead, (h, w) = shape[:-2], shape[-2:]
    gshape = grad.type.shape
    oh, ow = gshape[-2:]
    src = plan.access(grad, gshape)
    at = plan.access(idx, gshape)
    dst = Access(plan.buffers[out], dt, 0, (h * w, 1))          # over (plane, position)
    zero = fg.sg.const(0, dt)

    def body(g, lo, hi, tid):
        b, sg = g.b, g.sg
        with for_range(b, lo, hi, name="plane") as p:
            with for_range(b, 0, h * w, name="z") as k:
                g.store(zero, dst, [p, k])
            lidx = unflatten_index(b, p, lead)
            with for_range(b, 0, oh, name="oh") as o:
                with for_range(b, 0, ow, name="ow") as c:
                    k = g.load(at, lidx + [o, c]).v
                    with b.if_then(b.icmp_unsigned("<", k, i64_const(h * w))):
                        cur = g.load(dst, [p, k])
                        g.store(sg.add(cur, g.load(src, lidx + [o, c])), dst, [p, k])

    parallel_range(fg, math.prod(lead), body, work_per_iter=h * w + oh * ow)


register("max_pool2d_with_indices", "kernel", emit=_emit_forward, check=_check_forward)
register("max_pool2d_with_indices_backward", "kernel", emit=_emit_backward,
         check=_check_backward)
