"""The losses: mse_loss, binary_cross_entropy_with_logits and nll_loss.

One kernel per node: a loop nest over the loss's elements computing each element as the
reference does (same operations, same dtypes: the promoted dtype, then the result's), and
either storing it (reduction="none") or adding it to a float64 sum that is divided (mean:
by the element count, or for nll_loss by the sum of the picked weights) and rounded to the
result's dtype once. The reference sums in the result's dtype, pairwise; float64
accumulation agrees with it to the reference's own rounding.

nll_loss reads x[n, target[n, ...], ...]: a target equal to ignore_index counts as class 0
with weight 0 (as the reference's `where(keep, t, 0)`), and any other target outside
[0, C) (a negative one too: PyTorch's check, not NumPy's indexing from the end) raises the
group's flag (ops_index: the kernel raises IndexError, as the reference does)."""
import numpy as np
from llvmlite import ir

from ...ir.graph import Value
from ...ir.geometry import contiguous_strides
from . import vecmath
from .loops import Access, loop_nest
from .ops_index import INDEX_DTYPES, prepare_flag, zero_flag
from .scalar import F64, I64, Scalar, is_float
from .table import register


def _check_reduction(node):
    if node.attrs.get("reduction", "mean") not in ("none", "sum", "mean"):
        return f"reduction={node.attrs.get('reduction')!r}"
    return None


def _tensors(node):
    return [v for v in node.inputs if v is not None]


def _check_floats(node):
    vals = _tensors(node)
    if not all(isinstance(v, Value) for v in vals):
        return "a Python-number operand"
    if not all(is_float(v.type.dtype) for v in vals):
        return "a non-float operand"
    return _check_reduction(node)


def _loss_loop(plan, group, fg, shape, element, weight=None):
    """Run element(idx) -> Scalar (the result's dtype) over shape; store it or reduce it.
    weight(idx) -> float64 Scalar: the mean's denominator is the sum of these (nll_loss)."""
    node, b, sg = group.root, fg.b, fg.sg
    out = node.outputs[0]
    dt = out.type.dtype
    red = node.attrs.get("reduction", "mean")
    if red == "none":
        if out.type.numel:
            dst = Access(plan.buffers[out], dt, 0, contiguous_strides(shape))
            with loop_nest(b, shape) as idx:
                fg.store(element(idx), dst, idx)
        return
    total, wsum = fg.alloca(F64, "total"), fg.alloca(F64, "wsum")
    for slot in (total, wsum):
        b.store(sg.const(0, "float64").v, slot)

    def add(slot, v):
        b.store(b.fadd(b.load(slot, typ=F64), v.v, flags=("reassoc",)), slot)

    if all(n > 0 for n in shape):
        with loop_nest(b, shape) as idx:
            add(total, sg.cast(element(idx), "float64"))
            if weight is not None:
                add(wsum, weight(idx))
    r = Scalar(b.load(total, typ=F64), "float64")
    if red == "mean":
        n = int(np.prod(shape, dtype=np.int64))
        den = Scalar(b.load(wsum, typ=F64), "float64") if weight is not None \
            else sg.const(n, "float64")
        r = sg.div(r, den)
    fg.store(sg.cast(r, dt), Access(plan.buffers[out], dt, 0, ()), [])


def _read(fg, plan, v, shape, idx, dt):
    return fg.sg.cast(fg.load(plan.access(v, shape), idx), dt)


# ---- mse_loss -------------------------------------------------------------------------------

def _emit_mse(plan, group, fg):
    """((x - t) ** 2) in the promoted dtype."""
    node, sg = group.root, fg.sg
    x, t = node.inputs[:2]
    cdt = node.outputs[0].type.dtype
    shape = tuple(np.broadcast_shapes(x.type.shape, t.type.shape))

    def element(idx):
        d = sg.sub(_read(fg, plan, x, shape, idx, cdt), _read(fg, plan, t, shape, idx, cdt))
        return sg.mul(d, d)
    _loss_loop(plan, group, fg, shape, element)


register("mse_loss", "kernel", emit=_emit_mse, check=_check_floats)


# ---- binary_cross_entropy_with_logits -------------------------------------------------------

def _emit_bce(plan, group, fg):
    """(1 - t) * x + lw * (log1p(exp(-|x|)) + max(-x, 0)), lw = 1 + (pw - 1) * t, times w;
    computed in the operands' promoted dtype, then cast to x's (the reference's order)."""
    node, sg = group.root, fg.sg
    x, t, w, pw = node.inputs[:4]
    dt = node.outputs[0].type.dtype
    cdt = np.result_type(*[v.type.dtype for v in _tensors(node)]).name
    shape = tuple(np.broadcast_shapes(*[v.type.shape for v in _tensors(node)]))
    one = sg.const(1, cdt)

    def element(idx):
        xv, tv = _read(fg, plan, x, shape, idx, cdt), _read(fg, plan, t, shape, idx, cdt)
        sp = sg.add(vecmath.log1p(sg, vecmath.exp(sg, sg.neg(sg.abs(xv)))),
                    sg.maximum(sg.neg(xv), sg.const(0, cdt)))
        if pw is not None:
            lw = sg.add(one, sg.mul(sg.sub(_read(fg, plan, pw, shape, idx, cdt), one), tv))
            sp = sg.mul(lw, sp)
        loss = sg.add(sg.mul(sg.sub(one, tv), xv), sp)
        if w is not None:
            loss = sg.mul(loss, _read(fg, plan, w, shape, idx, cdt))
        return sg.cast(loss, dt)
    _loss_loop(plan, group, fg, shape, element)


register("binary_cross_entropy_with_logits", "kernel", emit=_emit_bce, check=_check_floats)


# ---- nll_loss -------------------------------------------------------------------------------

def _check_nll(node):
    x, t, w = node.inputs[:3]
    if not (isinstance(x, Value) and isinstance(t, Value)) or \
            (w is not None and not isinstance(w, Value)):
        return "a Python-number operand"
    if not is_float(x.type.dtype) or (w is not None and not is_float(w.type.dtype)):
        return "a non-float operand"
    if t.type.dtype not in INDEX_DTYPES:
        return f"target dtype {t.type.dtype}"
    xs, ts = x.type.shape, t.type.shape
    if len(xs) == 1 and ts == ():
        pass                            # one sample: (C,) with a target ()
    elif len(xs) < 2 or ts != xs[:1] + xs[2:]:
        return "an input that is not (N, C, ...) with a target (N, ...)"
    if t.type.numel and (xs[min(1, len(xs) - 1)] == 0 or (w is not None and w.type.shape[0] == 0)):
        return "no classes"
    return _check_reduction(node)


def checked_index(fg, flag, i, n):
    """i (an integer Scalar) if in [0, n), else 0 with the flag raised (no wrapping)."""
    b = fg.b
    v = fg.sg.cast(i, "int64").v
    bad = b.or_(b.icmp_signed("<", v, ir.Constant(I64, 0)),
                b.icmp_signed(">=", v, ir.Constant(I64, n)))
    p = fg.ptrs[flag]
    b.store(b.or_(b.load(p, typ=I64), b.zext(bad, I64)), p)
    return b.select(bad, ir.Constant(I64, 0), v)


def _emit_nll(plan, group, fg):
    node, sg = group.root, fg.sg
    x, t, w = node.inputs[:3]
    dt = x.type.dtype
    flag = group.state["flag"]
    zero_flag(fg, flag)
    shape = t.type.shape
    cdim = min(1, len(x.type.shape) - 1)          # the class dim: 0 for a (C,) input
    ncls = x.type.shape[cdim]
    ignore = sg.const(node.attrs.get("ignore_index", -100), "int64")
    xa, ta = plan.access(x, x.type.shape), plan.access(t, shape)
    wa = plan.access(w, w.type.shape) if w is not None else None
    memo = {}

    def parts(idx):
        """(picked element, its weight) at idx, both in x's dtype (computed once per idx)."""
        key = tuple(idx)
        if key not in memo:
            tv = sg.cast(fg.load(ta, idx), "int64")
            keep = sg.cmp("!=", tv, ignore).v
            safe = sg.select(keep, tv, sg.const(0, "int64"))
            j = checked_index(fg, flag, safe, ncls)
            picked = fg.load(xa, idx[:cdim] + [j] + idx[cdim:])
            if wa is not None:
                wj = checked_index(fg, flag, safe, w.type.shape[0])
                wt = sg.cast(fg.load(wa, [wj]), dt)
            else:
                wt = sg.const(1, dt)
            # (an ignored target's class-0 element may be -inf: its loss is 0, not NaN)
            memo[key] = (sg.select(keep, picked, sg.const(0, dt)),
                         sg.select(keep, wt, sg.const(0, dt)))
        return memo[key]

    def element(idx):
        picked, wt = parts(idx)
        return sg.sub(sg.const(0, dt), sg.mul(picked, wt))     # (an ignored target: +0.0)

    _loss_loop(plan, group, fg, shape, element,
               weight=lambda idx: sg.cast(parts(idx)[1], "float64"))


register("nll_loss", "kernel", emit=_emit_nll, prepare=prepare_flag, check=_check_nll)
