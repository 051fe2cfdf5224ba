"""Lowerings of sort, scatter and scatter_reduce (llgrad/ir/ops_sort.py).

sort: where PyTorch's order among equal values is its std::sort's (stable not asked for,
slices over 16 long: ir/select_order.py), a host call of the NumPy implementation, which
replays it; otherwise a bottom-up merge sort of each slice along dim, with the positions carried
beside the values, in two scratch buffers of one slice each (ping-pong). The number of
passes and the buffer each pass reads are known when the code is made (the slice length
is static), so the passes are unrolled; each merge is one branch-free loop over its output
(take the right run's head only when it is strictly before the left's: a stable sort, and
with descending=True ties keep their order too). NaN sorts last ascending and first
descending, as the reference. (topk is a host call: PyTorch's picks among equal values
are its nth_element's, ir/select_order.py.)

scatter / scatter_reduce: out = self, then one pass over index in C order (the order of
the reference's NumPy assignment and ufunc.at): scatter stores (the last write wins),
scatter_reduce combines with add / mul / maximum / minimum; include_self=False first sets
the written positions to the reduction's identity; "mean" counts the contributions per
position in a scratch buffer and divides at the end (floats only). Indices are wrapped and
bounds-checked with ops_index's flag."""
import numpy as np
from llvmlite import ir

from ...ir.graph import Value
from ...ir.geometry import contiguous_strides
from .fusion import compute_dtypes
from .loops import Access, for_range, loop_nest
from .ops_index import INDEX_DTYPES, _copy_to_out, prepare_flag, wrap_index, zero_flag
from .scalar import I64, Scalar, is_float
from .table import register
from . import host_call
from ...ir.select_order import sort_replayed


# ---- sort / topk -------------------------------------------------------------------------

def _by_host(node):
    """Whether PyTorch's order among equal values is std::sort's (ir/select_order.py): then
    the NumPy implementation, which replays it, is called back (host_call.py)."""
    x, at = node.inputs[0], node.attrs
    return isinstance(x, Value) and sort_replayed(x.type.shape, x.type.dtype, at["dim"],
                                                  at.get("descending", False), at.get("stable"))


def _check_sort(node):
    if not isinstance(node.inputs[0], Value):
        return "a Python-number operand"
    return host_call._check(node) if _by_host(node) else None


def _prepare_sort(plan, group):
    if _by_host(group.root):
        return host_call._prepare(plan, group)
    x = group.root.inputs[0]
    shape = x.type.shape
    n = shape[group.root.attrs["dim"]] if shape else 1
    dt = x.type.dtype
    group.state["runs"] = [(plan.temp(group, dt, max(n, 1)), plan.temp(group, "int64", max(n, 1)))
                           for _ in range(2)]


def _before(sg, b, x, y, descending):
    """x sorts strictly before y (NaN largest)."""
    if not is_float(x.dt):
        return sg.cmp(">" if descending else "<", x, y).v
    if descending:
        return b.or_(sg.cmp(">", x, y).v, b.and_(sg.isnan(x), b.not_(sg.isnan(y))))
    return b.or_(sg.cmp("<", x, y).v, b.and_(sg.isnan(y), b.not_(sg.isnan(x))))


def _emit_sort(plan, group, fg):
    if _by_host(group.root):
        return host_call._emit(plan, group, fg)
    node, b, sg = group.root, fg.b, fg.sg
    x = node.inputs[0]
    vals, idxs = node.outputs
    if vals.type.numel == 0:
        return
    shape, dt = x.type.shape, x.type.dtype
    zero = ir.Constant(I64, 0)
    if not shape:                       # a 0-d input is its own sort
        fg.store(fg.load(plan.access(x, ()), []), Access(plan.buffers[vals], dt, 0, ()), [])
        fg.store(Scalar(zero, "int64"), Access(plan.buffers[idxs], "int64", 0, ()), [])
        return
    dim = node.attrs["dim"]
    n = shape[dim]
    k = node.attrs.get("k", n)
    desc = node.attrs.get("descending", node.attrs.get("largest", False))
    rest = [d for d in range(len(shape)) if d != dim]
    src = plan.access(x, shape)
    ostr = contiguous_strides(vals.type.shape)
    dst_v = Access(plan.buffers[vals], dt, 0, ostr)
    dst_i = Access(plan.buffers[idxs], "int64", 0, ostr)
    runs = [(Access(v, dt, 0, (1,)), Access(i, "int64", 0, (1,))) for v, i in group.state["runs"]]
    i_slot, j_slot = fg.alloca(I64, "left"), fg.alloca(I64, "right")

    def full(ridx, j):
        it = iter(ridx)
        return [j if d == dim else next(it) for d in range(len(shape))]

    with loop_nest(b, [shape[d] for d in rest], name="r") as ridx:
        cur, nxt = runs
        with for_range(b, 0, n, name="c") as j:
            fg.store(fg.load(src, full(ridx, j)), cur[0], [j])
            fg.store(Scalar(j, "int64"), cur[1], [j])
        width = 1
        while width < n:
            _merge_pass(fg, cur, nxt, n, width, desc, i_slot, j_slot)
            cur, nxt = nxt, cur
            width *= 2
        with for_range(b, 0, k, name="w") as j:
            fg.store(fg.load(cur[0], [j]), dst_v, full(ridx, j))
            fg.store(fg.load(cur[1], [j]), dst_i, full(ridx, j))


def _merge_pass(fg, cur, nxt, n, width, desc, i_slot, j_slot):
    """Merge the runs of `width` of cur into runs of 2 * width in nxt."""
    b, sg = fg.b, fg.sg
    nn = ir.Constant(I64, n)

    def smin(a, c):
        return b.select(b.icmp_signed("<", a, c), a, c)

    with for_range(b, 0, n, step=2 * width, name="lo") as lo:
        mid = smin(b.add(lo, ir.Constant(I64, width)), nn)
        hi = smin(b.add(lo, ir.Constant(I64, 2 * width)), nn)
        b.store(lo, i_slot)
        b.store(mid, j_slot)
        with for_range(b, lo, hi, name="t") as t:
            i, j = b.load(i_slot, typ=I64), b.load(j_slot, typ=I64)
            i_ok, j_ok = b.icmp_signed("<", i, mid), b.icmp_signed("<", j, hi)
            ic, jc = b.select(i_ok, i, lo), b.select(j_ok, j, lo)   # (in bounds either way)
            a, c = fg.load(cur[0], [ic]), fg.load(cur[0], [jc])
            right = b.and_(j_ok, b.or_(b.not_(i_ok), _before(sg, b, c, a, desc)))
            fg.store(sg.select(right, c, a), nxt[0], [t])
            ia, ic_ = fg.load(cur[1], [ic]), fg.load(cur[1], [jc])
            fg.store(sg.select(right, ic_, ia), nxt[1], [t])
            step = b.zext(right, I64)
            b.store(b.add(i, b.sub(ir.Constant(I64, 1), step)), i_slot)
            b.store(b.add(j, step), j_slot)


register("sort", "kernel", emit=_emit_sort, prepare=_prepare_sort, check=_check_sort)


# ---- scatter / scatter_reduce ---------------------------------------------------------------

def _check_scatter(node):
    x, index, src = node.inputs[:3]
    if not (isinstance(x, Value) and isinstance(index, Value)):
        return "a Python-number operand"
    if index.type.dtype not in INDEX_DTYPES:
        return f"index dtype {index.type.dtype}"
    if not x.type.shape or len(index.type.shape) != len(x.type.shape):
        return "an index of another rank"
    if index.type.numel and x.type.shape[node.attrs["dim"] % len(x.type.shape)] == 0:
        return "scattering into an empty dim"
    if node.op == "scatter_reduce":
        dt = node.outputs[0].type.dtype
        if dt == "bool":
            return "a bool result"
        if node.attrs["reduce"] == "mean" and not is_float(dt):
            return "an integer mean"
        if not isinstance(src, Value):
            return "a Python-number source"
    return None


def _identity(reduce, dt):
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    if is_float(dt):
        return -np.inf if reduce == "amax" else np.inf
    info = np.iinfo(dt)
    return int(info.min if reduce == "amax" else info.max)


def _prepare_scatter(plan, group):
    prepare_flag(plan, group)
    node = group.root
    if node.op == "scatter_reduce" and node.attrs["reduce"] == "mean":
        group.state["count"] = plan.temp(group, "int64", max(node.outputs[0].type.numel, 1))


def _emit_scatter(plan, group, fg):
    node, b, sg = group.root, fg.b, fg.sg
    x, index, src = node.inputs[:3]
    out = node.outputs[0]
    dt = out.type.dtype
    flag = group.state["flag"]
    zero_flag(fg, flag)
    shape = x.type.shape
    dim = node.attrs["dim"] % len(shape)
    dst = _copy_to_out(plan, fg, x, out)
    ishape = index.type.shape
    reduce = node.attrs.get("reduce")
    count = None
    if "count" in group.state:
        count = Access(group.state["count"], "int64", 0, contiguous_strides(shape))
        init = ir.Constant(I64, 1 if node.attrs.get("include_self", True) else 0)
        with loop_nest(b, shape) as idx:
            fg.store(Scalar(init, "int64"), count, idx)
    if index.type.numel:
        ia = plan.access(index, ishape)
        cdt = compute_dtypes(node)[2] if isinstance(src, Value) else None
        sa = plan.access(src, src.type.shape) if isinstance(src, Value) else None

        if reduce is not None and not node.attrs.get("include_self", True):
            ident = sg.const(_identity(reduce, dt), dt)
            with loop_nest(b, ishape) as idx:
                j = wrap_index(fg, flag, fg.load(ia, idx), shape[dim], negative=False)
                fg.store(ident, dst, idx[:dim] + [j] + idx[dim + 1:])
        with loop_nest(b, ishape) as idx:                        # C order, as the reference
            j = wrap_index(fg, flag, fg.load(ia, idx), shape[dim], negative=False)
            oi = idx[:dim] + [j] + idx[dim + 1:]
            if sa is None:
                v = sg.const(src, dt)
            else:
                v = sg.cast(fg.load(sa, idx), cdt or sa.dt)
                v = sg.cast(v, dt)
            if reduce is not None:
                old = fg.load(dst, oi)
                v = {"sum": sg.add, "mean": sg.add, "prod": sg.mul, "amax": sg.maximum,
                     "amin": sg.minimum}[reduce](old, v)
            fg.store(v, dst, oi)
            if count is not None:
                c = fg.load(count, oi)
                fg.store(Scalar(b.add(c.v, ir.Constant(I64, 1)), "int64"), count, oi)
    if count is not None:
        with loop_nest(b, shape) as idx:
            c = fg.load(count, idx)
            one = ir.Constant(I64, 1)
            c = b.select(b.icmp_signed("<", c.v, one), one, c.v)
            fg.store(sg.div(fg.load(dst, idx), sg.cast(Scalar(c, "int64"), dt)), dst, idx)


for _op in ("scatter", "scatter_reduce"):
    register(_op, "kernel", emit=_emit_scatter, prepare=_prepare_scatter, check=_check_scatter)
