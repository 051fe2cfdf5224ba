"""Reductions (sum, mean, prod, amax, amin, max, min, all, any) over any dims, with keepdim,
reading a fused elementwise prologue.

The iteration space is the operand's shape; the output is addressed with stride 0 on the
reduced dims. After ordering (by the operand's memory order) and coalescing, the trailing
run of reduced dims is reduced in a register; reduced dims further out (e.g. a sum over
dim 0 of a row-major matrix) accumulate into a buffer laid out like the output, so the
inner loop runs along memory either way. Float sums accumulate in float64 (float32 data
then matches np.sum's pairwise result to ~1e-7), in blocks of BLOCK elements for long
runs; the accumulation is marked reassociable so LLVM vectorises it. prod multiplies in the
result's dtype (as np.prod: float32 overflows where NumPy's does); all/any reduce the
elements' truth (NaN is true) with and/or."""
from llvmlite import ir

from ...ir.graph import Value
from ...ir.geometry import contiguous_strides
from .fusion import Expr
from .loops import Access, float32_sum_hints, for_range, loop_nest, normalize
from .scalar import DTYPES, I64, Scalar, is_float, is_unsigned, reg_type
from .table import register

BLOCK = 1024
_KINDS = {"sum": "sum", "mean": "sum", "amax": "max", "max": "max", "amin": "min",
          "min": "min", "prod": "prod", "all": "all", "any": "any"}


def reduced_dims(node):
    """The dims a reduction node reduces (all of them for dim=None), as a set."""
    nd = len(node.inputs[0].type.shape)
    d = node.attrs.get("dim")
    return set(range(nd)) if d is None else {int(i) % max(nd, 1) for i in
                                             ((d,) if isinstance(d, int) else d)}


def _check(node):
    x = node.inputs[0]
    if not isinstance(x, Value):
        return "a reduction of a Python number"
    if node.attrs.get("dtype") not in (None, *DTYPES):
        return f"dtype={node.attrs.get('dtype')!r}"
    if _KINDS[node.op] in ("max", "min"):
        shape = x.type.shape
        if any(shape[d] == 0 for d in reduced_dims(node)):
            return "max/min over an empty dim"
        if x.type.dtype != node.outputs[0].type.dtype:
            return "max/min changing dtype"
    return None


def _red_dtype(node):
    """The dtype elements are reduced in (NumPy's): sum's dtype attr, else the output's."""
    return node.attrs.get("dtype") or node.outputs[0].type.dtype


def _acc_dtype(node):
    kind, rdt = _KINDS[node.op], _red_dtype(node)
    if kind == "sum":
        return "float64" if is_float(rdt) else "int64"
    return rdt


def _identity(sg, kind, dt):
    if kind in ("sum", "prod", "all", "any"):
        return sg.const({"sum": 0, "prod": 1, "all": 1, "any": 0}[kind], dt)
    big = kind == "min"
    if is_float(dt):
        return sg.const(float("inf") if big else float("-inf"), dt)
    t = reg_type(dt)
    if dt == "bool":
        return sg.const(big, dt)
    if is_unsigned(dt):
        return Scalar(ir.Constant(t, (1 << t.width) - 1 if big else 0), dt)
    return Scalar(ir.Constant(t, (1 << (t.width - 1)) - 1 if big else -(1 << (t.width - 1))), dt)


def _combine(sg, kind, a, b):
    if kind == "sum":
        if is_float(a.dt):
            return Scalar(sg.b.fadd(a.v, b.v, flags=("reassoc",)), a.dt)
        return sg.add(a, b)
    if kind == "prod":
        if is_float(a.dt):
            return Scalar(sg.b.fmul(a.v, b.v, flags=("reassoc",)), a.dt)
        return sg.mul(a, b)
    if kind in ("all", "any"):
        f = sg.b.and_ if kind == "all" else sg.b.or_
        return Scalar(f(a.v, b.v), a.dt)
    return sg.maximum(a, b) if kind == "max" else sg.minimum(a, b)


def _prepare(plan, group):
    node = group.root
    x = node.inputs[0]
    shape = x.type.shape
    nd = len(shape)
    dims = reduced_dims(node)
    keep = node.attrs.get("keepdim", False)
    out_t = node.outputs[0].type
    red = [d in dims for d in range(nd)]
    ocs = contiguous_strides(out_t.shape)
    ostr, k = [], 0
    for d in range(nd):
        if red[d]:
            ostr.append(0)
            k += keep
        else:
            ostr.append(ocs[k])
            k += 1
    leaves = [(v, plan.access(v, shape)) for v in group.leaves]
    # order loops by the memory order of the first operand read at every index
    ref = next((1 + i for i, (_, a) in enumerate(leaves)
                if all(s != 0 for s, n in zip(a.strides, shape) if n != 1)), None)
    ext, strides, red_n, _ = normalize(shape, [tuple(ostr)] + [a.strides for _, a in leaves],
                                       red, ref=ref)
    j = len(ext)
    while j > 0 and red_n[j - 1]:
        j -= 1
    count = 1
    for d in dims:
        count *= shape[d]
    kind = _KINDS[node.op]
    acc_dt = _acc_dtype(node)
    mem = any(red_n[:j])
    needs_final = acc_dt != out_t.dtype or node.op == "mean"
    st = group.state
    st.update(kind=kind, acc_dt=acc_dt, ext=ext, j=j, mem=mem, count=count,
              empty=any(shape[d] == 0 for d in dims) and out_t.numel > 0,
              out_strides=strides[0], leaves={v: a.with_strides(s)
                                              for (v, a), s in zip(leaves, strides[1:])})
    st["acc_buf"] = plan.temp(group, acc_dt, out_t.numel) if mem and needs_final else None
    st["needs_final"] = needs_final


def _finalize(sg, node, st, acc):
    out_dt = node.outputs[0].type.dtype
    if node.op == "mean":
        acc = sg.cast(acc, "float64") if not is_float(acc.dt) else acc
        acc = sg.div(acc, sg.const(st["count"], acc.dt))
    return sg.cast(acc, out_dt)


def _emit(plan, group, fg):
    node, st, sg, b = group.root, group.state, fg.sg, fg.b
    out_t = node.outputs[0].type
    out_buf = plan.buffers[node.outputs[0]]
    flat_out = Access(out_buf, out_t.dtype, 0, (1,))
    kind, acc_dt = st["kind"], st["acc_dt"]
    if out_t.numel == 0:
        return
    if st["empty"]:
        with for_range(b, 0, out_t.numel) as i:
            fg.store(_finalize(sg, node, st, _identity(sg, kind, acc_dt)), flat_out, [i])
        return
    ext, j, mem = st["ext"], st["j"], st["mem"]
    acc_buf = st["acc_buf"] or out_buf
    flat_acc = Access(acc_buf, acc_dt, 0, (1,))
    if mem:
        with for_range(b, 0, out_t.numel) as i:
            fg.store(_identity(sg, kind, acc_dt), flat_acc, [i])
    outer_str = st["out_strides"][:j]
    x = node.inputs[0]
    rdt = _red_dtype(node)
    members = [m for m in group.members if m is not node]
    rt = reg_type(acc_dt)
    r = fg.alloca(rt, "acc")

    hints = float32_sum_hints(fg.module, [x.type.dtype], ext[-1]) \
        if acc_dt == "float64" and ext else None

    def elem(idx):
        v = Expr(fg, members, st["leaves"], idx).value(x)
        return sg.cast(sg.cast(v, rdt), acc_dt)

    def accumulate(slot, idx):
        cur = Scalar(b.load(slot, typ=rt), acc_dt)
        b.store(_combine(sg, kind, cur, elem(idx)).v, slot)

    with loop_nest(b, ext[:j], name="o") as oidx:
        b.store(_identity(sg, kind, acc_dt).v, r)
        inner = ext[j:]
        if not inner:
            accumulate(r, oidx)
        else:
            with loop_nest(b, inner[:-1], name="r") as pidx:
                n = inner[-1]
                if kind == "sum" and is_float(acc_dt) and n >= 2 * BLOCK:
                    nb = n // BLOCK
                    blk = fg.alloca(rt, "blk")
                    with for_range(b, 0, nb, name="blk") as jb:
                        b.store(_identity(sg, kind, acc_dt).v, blk)
                        base = b.mul(jb, ir.Constant(I64, BLOCK), flags=("nsw",))
                        with for_range(b, 0, BLOCK, name="k", hints=hints) as kk:
                            accumulate(blk, oidx + pidx + [b.add(base, kk, flags=("nsw",))])
                        cur = Scalar(b.load(r, typ=rt), acc_dt)
                        part = Scalar(b.load(blk, typ=rt), acc_dt)
                        b.store(_combine(sg, kind, cur, part).v, r)
                    start = nb * BLOCK
                else:
                    start = 0
                with for_range(b, start, n, name="k", hints=hints) as kk:
                    accumulate(r, oidx + pidx + [kk])
        total = Scalar(b.load(r, typ=rt), acc_dt)
        if mem:
            dst = Access(acc_buf, acc_dt, 0, outer_str)
            fg.store(_combine(sg, kind, fg.load(dst, oidx), total), dst, oidx)
        else:
            fg.store(_finalize(sg, node, st, total), Access(out_buf, out_t.dtype, 0, outer_str),
                     oidx)
    if mem and st["needs_final"]:
        with for_range(b, 0, out_t.numel) as i:
            fg.store(_finalize(sg, node, st, fg.load(flat_acc, [i])), flat_out, [i])


for _op in _KINDS:
    register(_op, "reduce", emit=_emit, prepare=_prepare, check=_check)

