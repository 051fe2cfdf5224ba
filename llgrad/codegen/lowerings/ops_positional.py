"""Ops whose result depends on where elements sit along a dim: argmax, argmin, max_dim,
min_dim (values and indices) and cumsum.

argmax/argmin/max_dim/min_dim: a loop nest over the kept dims, and for each kept index one
pass over the reduced dims in logical (C) order with a running best value and the flat
position where it was found. A later element replaces the best only when strictly better,
so ties keep the first index; a NaN replaces any non-NaN best and nothing replaces a NaN,
so the first NaN wins (the reference's _nanargmax: NaN is the maximum and the minimum).
max_dim's value is the best itself, which is the element at the index (NaN included).

cumsum: sequential sums along dim in the result's dtype (int64 for integer and bool data),
the order np.cumsum adds in, so the results are equal bit for bit. The loop along dim is
outermost and each step adds a whole slice to the previous one (out[k] = out[k-1] + x[k]),
so the inner loops run across the other dims and vectorise."""
from llvmlite import ir

from ...ir.graph import Value
from ...ir.geometry import contiguous_strides
from .loops import Access, for_range, loop_nest
from .scalar import I64, Scalar, is_float, is_unsigned, reg_type
from .table import register


def _red_dims(node):
    nd = len(node.inputs[0].type.shape)
    d = node.attrs.get("dim")
    if d is None or nd == 0:
        return list(range(nd))
    ds = (d,) if isinstance(d, int) else tuple(d)
    return sorted({int(i) % max(nd, 1) for i in ds})


def _check_arg(node):
    x = node.inputs[0]
    if not isinstance(x, Value):
        return "a Python-number operand"
    if node.outputs[0].type.numel:
        shape = x.type.shape
        if any(shape[d] == 0 for d in _red_dims(node)):
            return "an arg-reduction over an empty dim (the reference raises)"
    return None


def _worst(sg, dt, maximum):
    """The start value: what every element beats or ties (-inf for a max, ...)."""
    if is_float(dt):
        return sg.const(float("-inf") if maximum else float("inf"), dt)
    if dt == "bool":
        return sg.const(not maximum, dt)
    t = reg_type(dt)
    if is_unsigned(dt):
        return Scalar(ir.Constant(t, (1 << t.width) - 1 if not maximum else 0), dt)
    lo, hi = -(1 << (t.width - 1)), (1 << (t.width - 1)) - 1
    return Scalar(ir.Constant(t, lo if maximum else hi), dt)


def _out_strides(shape, red, out_shape, keepdim):
    """Strides of the result over the operand's dims (0 on the reduced ones)."""
    ocs = contiguous_strides(out_shape)
    ostr, k = [], 0
    for d in range(len(shape)):
        if d in red:
            ostr.append(0)
            k += keepdim
        else:
            ostr.append(ocs[k] if k < len(ocs) else 0)
            k += 1
    return tuple(ostr)


def _emit_arg(plan, group, fg):
    node, b, sg = group.root, fg.b, fg.sg
    x = node.inputs[0]
    shape = x.type.shape
    nd = len(shape)
    dt = x.type.dtype
    outs = node.outputs
    if outs[0].type.numel == 0:
        return
    maximum = node.op in ("argmax", "max_dim")
    red = _red_dims(node)
    kept = [d for d in range(nd) if d not in red]
    keep = node.attrs.get("keepdim", False)
    ostr = _out_strides(shape, red, outs[0].type.shape, keep)
    dsts = [Access(plan.buffers[o], o.type.dtype, 0, ostr) for o in outs]
    src = plan.access(x, shape)
    best_slot = fg.alloca(reg_type(dt), "best")
    at_slot = fg.alloca(I64, "at")
    pos_slot = fg.alloca(I64, "pos")
    better = ">" if maximum else "<"
    with loop_nest(b, [shape[d] for d in kept], name="o") as oidx:
        b.store(_worst(sg, dt, maximum).v, best_slot)
        b.store(ir.Constant(I64, 0), at_slot)
        b.store(ir.Constant(I64, 0), pos_slot)
        with loop_nest(b, [shape[d] for d in red], name="r") as ridx:
            it_o, it_r = iter(oidx), iter(ridx)
            full = [next(it_r) if d in red else next(it_o) for d in range(nd)]
            v = fg.load(src, full)
            best = Scalar(b.load(best_slot, typ=best_slot.allocated_type), dt)
            pos = b.load(pos_slot, typ=I64)
            take = sg.cmp(better, v, best).v
            if is_float(dt):
                take = b.or_(take, b.and_(sg.isnan(v), b.not_(sg.isnan(best))))
            b.store(b.select(take, v.v, best.v), best_slot)
            b.store(b.select(take, pos, b.load(at_slot, typ=I64)), at_slot)
            b.store(b.add(pos, ir.Constant(I64, 1)), pos_slot)
        full_o = []
        it_o = iter(oidx)
        for d in range(nd):
            full_o.append(ir.Constant(I64, 0) if d in red else next(it_o))
        if len(outs) == 2:
            best = Scalar(b.load(best_slot, typ=best_slot.allocated_type), dt)
            fg.store(sg.cast(best, outs[0].type.dtype), dsts[0], full_o)
        fg.store(Scalar(b.load(at_slot, typ=I64), "int64"), dsts[-1], full_o)  # the indices


for _op in ("argmax", "argmin", "max_dim", "min_dim"):
    register(_op, "kernel", emit=_emit_arg, check=_check_arg)


# ---- cumsum ---------------------------------------------------------------------------------

def _check_cumsum(node):
    x = node.inputs[0]
    if not isinstance(x, Value):
        return "a Python-number operand"
    if not x.type.shape:
        return "a 0-d operand"
    return None


def _emit_cumsum(plan, group, fg):
    node, b, sg = group.root, fg.b, fg.sg
    x = node.inputs[0]
    out = node.outputs[0]
    shape = x.type.shape
    nd = len(shape)
    dim = node.attrs["dim"] % nd
    dt = out.type.dtype
    if out.type.numel == 0:
        return
    src = plan.access(x, shape)
    ostr = contiguous_strides(shape)
    dst = Access(plan.buffers[out], dt, 0, ostr)
    rest = [d for d in range(nd) if d != dim]

    def full(k, ridx):
        it = iter(ridx)
        return [k if d == dim else next(it) for d in range(nd)]

    # each slice's sum in a register, float32's in float64 (PyTorch's CPU accumulation
    # type, as the reference), each result rounded once; in_dtype: in its own dtype
    acc_dt = "float64" if dt == "float32" and not node.attrs.get("in_dtype") else dt
    slot = fg.alloca(reg_type(acc_dt), "acc")
    with loop_nest(b, [shape[d] for d in rest], name="r") as ridx:
        idx = full(ir.Constant(I64, 0), ridx)
        first = sg.cast(fg.load(src, idx), acc_dt)
        if is_float(dt):        # (+ 0.0, as the reference: a sum from +0 makes -0 +0)
            first = sg.add(first, sg.const(0.0, acc_dt))
        b.store(first.v, slot)
        fg.store(sg.cast(first, dt), dst, idx)
        with for_range(b, 1, shape[dim], name="k") as k:
            idx = full(k, ridx)
            acc = Scalar(b.load(slot, typ=slot.allocated_type), acc_dt)
            acc = sg.add(acc, sg.cast(fg.load(src, idx), acc_dt))
            b.store(acc.v, slot)
            fg.store(sg.cast(acc, dt), dst, idx)


register("cumsum", "kernel", emit=_emit_cumsum, check=_check_cumsum)
