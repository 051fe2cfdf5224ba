"""Lowerings of the positional ops (tril, triu, arange, flip, roll, repeat, diag_embed,
diagonal_copy), cumprod, and the elementwise rounding ops and random fills of
llgrad/ir/ops_tensor.py and ops_fill.py. (unfold is a view: no code; baddbmm,
round_decimals and linalg_vector_norm are lowered as their decompositions.)

The data-movement ops are copies: the result (contiguous) is written in C order and each
element read from its source through an Access whose strides and offset say where it sits
(flip negates strides; roll copies each dim in two blocks, the wrapped part and the rest;
repeat walks (copy, element) pairs of dims with stride 0 over the copies; the diagonals
are strided geometries of the matrix planes). Every element is read and written once, so
the results equal the reference's bit for bit."""
import numpy as np
from llvmlite import ir

from ...ir.graph import Value
from ...ir.geometry import contiguous_strides
from ...ir.ops_shape import _diagonal, relative_geometry
from .loops import Access, for_range, loop_nest
from .scalar import I64, Scalar, is_float, reg_type
from .table import elementwise, register


def _check_operand(node):
    if not isinstance(node.inputs[0], Value):
        return "a Python-number operand"
    return None


def _out(plan, v):
    return Access(plan.buffers[v], v.type.dtype, 0, contiguous_strides(v.type.shape))


def _copy(fg, src, dst, extents):
    if any(n == 0 for n in extents):
        return
    with loop_nest(fg.b, extents) as idx:
        fg.store(fg.sg.cast(fg.load(src, idx), dst.dt), dst, idx)


def _at(acc, offset, strides=None):
    return Access(acc.buf, acc.dt, acc.offset + offset,
                  acc.strides if strides is None else tuple(strides))


# ---- tril / triu --------------------------------------------------------------------------

def _emit_tri(plan, group, fg):
    node, b, sg = group.root, fg.b, fg.sg
    x, out = node.inputs[0], node.outputs[0]
    shape = x.type.shape
    if out.type.numel == 0:
        return
    src, dst = plan.access(x, shape), _out(plan, out)
    k = ir.Constant(I64, node.attrs.get("diagonal", 0))
    zero = sg.const(0, out.type.dtype)
    with loop_nest(b, shape) as idx:
        diff = b.sub(idx[-1], idx[-2])          # column - row
        keep = b.icmp_signed("<=" if node.op == "tril" else ">=", diff, k)
        v = sg.cast(fg.load(src, idx), out.type.dtype)
        fg.store(sg.select(keep, v, zero), dst, idx)


for _op in ("tril", "triu"):
    register(_op, "kernel", emit=_emit_tri, check=_check_operand)


# ---- arange ---------------------------------------------------------------------------------

def _emit_arange(plan, group, fg):
    node, b, sg = group.root, fg.b, fg.sg
    out = node.outputs[0]
    if out.type.numel == 0:
        return
    start, step = (ir.Constant(I64, node.attrs[k]) for k in ("start", "step"))
    with loop_nest(b, out.type.shape) as idx:       # in int64, then cast, as the impl
        v = Scalar(b.add(start, b.mul(step, idx[0])), "int64")
        fg.store(sg.cast(v, out.type.dtype), _out(plan, out), idx)


register("arange", "kernel", emit=_emit_arange)


# ---- flip -----------------------------------------------------------------------------------

def _emit_flip(plan, group, fg):
    node = group.root
    x, out = node.inputs[0], node.outputs[0]
    shape = x.type.shape
    src = plan.access(x, shape)
    off, strides = src.offset, list(src.strides)
    for d in node.attrs["dims"]:
        off += (shape[d] - 1) * strides[d]
        strides[d] = -strides[d]
    _copy(fg, Access(src.buf, src.dt, off, tuple(strides)), _out(plan, out), shape)


register("flip", "kernel", emit=_emit_flip, check=_check_operand)


# ---- roll -----------------------------------------------------------------------------------

def _shifts(node, shape):
    """{dim: shift in [0, n)} (shifts of a repeated dim add up, as np.roll's)."""
    out = {}
    for s, d in zip(node.attrs["shifts"], node.attrs["dims"]):
        out[d] = out.get(d, 0) + s
    return {d: s % shape[d] for d, s in out.items() if shape[d] and s % shape[d]}


def _emit_roll(plan, group, fg):
    node = group.root
    x, out = node.inputs[0], node.outputs[0]
    shape = x.type.shape
    if out.type.numel == 0:
        return
    if node.attrs.get("dims") is None:
        return _emit_roll_flat(plan, fg, x, out, node.attrs["shifts"][0])
    src, dst = plan.access(x, shape), _out(plan, out)
    # blocks: (extents, source offset, destination offset); each rolled dim splits each
    # block in two: out[s:] = x[:n - s] and out[:s] = x[n - s:]
    blocks = [(list(shape), 0, 0)]
    for d, s in _shifts(node, shape).items():
        n, ss, ds = shape[d], src.strides[d], dst.strides[d]
        split = []
        for ext, so, do in blocks:
            split.append((ext[:d] + [n - s] + ext[d + 1:], so, do + s * ds))
            split.append((ext[:d] + [s] + ext[d + 1:], so + (n - s) * ss, do))
        blocks = split
    for ext, so, do in blocks:
        _copy(fg, _at(src, so), _at(dst, do), ext)


def _emit_roll_flat(plan, fg, x, out, shift):
    """dims=None: the flattened tensor rolled. A contiguous source is two flat copies;
    otherwise each element's source position is unravelled from its flat index."""
    b, sg = fg.b, fg.sg
    shape = x.type.shape
    n = out.type.numel
    s = shift % n
    src, dst = plan.access(x, shape), _out(plan, out)
    cs = contiguous_strides(shape)
    if all(a == c for a, c, m in zip(src.strides, cs, shape) if m > 1):
        flat_src, flat_dst = _at(src, 0, (1,)), Access(dst.buf, dst.dt, 0, (1,))
        _copy(fg, flat_src, _at(flat_dst, s), [n - s])
        _copy(fg, _at(flat_src, n - s), flat_dst, [s])
        return
    with for_range(b, 0, n, name="f") as f:
        k = b.urem(b.add(f, ir.Constant(I64, n - s)), ir.Constant(I64, n))
        pos = ir.Constant(I64, src.offset)
        for m, c, st in zip(shape, cs, src.strides):
            i = b.urem(b.udiv(k, ir.Constant(I64, c)), ir.Constant(I64, m))
            pos = b.add(pos, b.mul(i, ir.Constant(I64, st)))
        v = fg.load(Access(src.buf, src.dt, 0, (1,)), [pos])
        fg.store(sg.cast(v, dst.dt), Access(dst.buf, dst.dt, 0, (1,)), [f])


register("roll", "kernel", emit=_emit_roll, check=_check_operand)


# ---- repeat ----------------------------------------------------------------------------------

def _emit_repeat(plan, group, fg):
    """Loops over (copy, element) pairs of dims: the copy loop has source stride 0."""
    node = group.root
    x, out = node.inputs[0], node.outputs[0]
    reps = node.attrs["repeats"]
    padded = (1,) * (len(reps) - len(x.type.shape)) + tuple(x.type.shape)
    src, dst = plan.access(x, padded), _out(plan, out)
    ext, sstr, dstr = [], [], []
    for r, n, ss, ds in zip(reps, padded, src.strides, dst.strides):
        ext += [r, n]
        sstr += [0, ss]
        dstr += [n * ds, ds]
    _copy(fg, _at(src, 0, sstr), _at(dst, 0, dstr), ext)


register("repeat", "kernel", emit=_emit_repeat, check=_check_operand)


# ---- diagonals ---------------------------------------------------------------------------

def _emit_diag_embed(plan, group, fg):
    node, b, sg = group.root, fg.b, fg.sg
    x, out = node.inputs[0], node.outputs[0]
    if out.type.numel == 0:
        return
    flat = Access(plan.buffers[out], out.type.dtype, 0, (1,))
    zero = sg.const(0, out.type.dtype)
    with for_range(b, 0, out.type.numel) as i:
        fg.store(zero, flat, [i])
    attrs = {k: node.attrs.get(k, v) for k, v in (("offset", 0), ("dim1", 0), ("dim2", 1))}
    shape, strides, off = relative_geometry(_diagonal, out.type.shape, attrs)
    _copy(fg, plan.access(x, x.type.shape), Access(flat.buf, flat.dt, off, strides), shape)


def _emit_diagonal_copy(plan, group, fg):
    node = group.root
    x, out = node.inputs[0], node.outputs[0]
    shape = x.type.shape
    k = node.attrs.get("offset", 0)
    d1, d2 = node.attrs.get("dim1", 0), node.attrs.get("dim2", 1)
    src = plan.access(x, shape)
    s1, s2 = src.strides[d1], src.strides[d2]
    off = src.offset + (k * s2 if k >= 0 else -k * s1)
    rest = [d for d in range(len(shape)) if d not in (d1, d2)]
    strides = [src.strides[d] for d in rest] + [s1 + s2]
    _copy(fg, Access(src.buf, src.dt, off, tuple(strides)), _out(plan, out), out.type.shape)


register("diag_embed", "kernel", emit=_emit_diag_embed, check=_check_operand)
register("diagonal_copy", "kernel", emit=_emit_diagonal_copy, check=_check_operand)


# ---- cumprod ------------------------------------------------------------------------------

def _check_cumprod(node):
    if not isinstance(node.inputs[0], Value):
        return "a Python-number operand"
    if not node.inputs[0].type.shape:
        return "a 0-d operand"
    return None


def _emit_cumprod(plan, group, fg):
    """Sequential products along dim (np.cumprod's order), each slice's in a register:
    float32's in float64 (PyTorch's CPU accumulation type, as the reference), each result
    rounded once."""
    node, b, sg = group.root, fg.b, fg.sg
    x, out = node.inputs[0], node.outputs[0]
    shape = x.type.shape
    dim, dt = node.attrs["dim"] % len(shape), out.type.dtype
    if out.type.numel == 0:
        return
    src, dst = plan.access(x, shape), _out(plan, out)
    rest = [d for d in range(len(shape)) if d != dim]

    def full(k, ridx):
        it = iter(ridx)
        return [k if d == dim else next(it) for d in range(len(shape))]

    acc_dt = "float64" if dt == "float32" else dt
    slot = fg.alloca(reg_type(acc_dt), "acc")
    with loop_nest(b, [shape[d] for d in rest], name="r") as ridx:
        idx = full(ir.Constant(I64, 0), ridx)
        first = sg.cast(fg.load(src, idx), acc_dt)
        b.store(first.v, slot)
        fg.store(sg.cast(first, dt), dst, idx)
        with for_range(b, 1, shape[dim], name="k") as k:
            idx = full(k, ridx)
            acc = Scalar(b.load(slot, typ=slot.allocated_type), acc_dt)
            acc = sg.mul(acc, sg.cast(fg.load(src, idx), acc_dt))
            b.store(acc.v, slot)
            fg.store(sg.cast(acc, dt), dst, idx)


register("cumprod", "kernel", emit=_emit_cumprod, check=_check_cumprod)


# ---- rounding (elementwise) ---------------------------------------------------------------

def _no_bool(node):
    if any(isinstance(x, Value) and x.type.dtype == "bool" for x in node.inputs):
        return "bool operands"
    return None


@elementwise("ceil", "trunc", check=_no_bool)
def _ceil_trunc(sg, node, a):
    if not is_float(a.dt):
        return a                        # (integers are their own ceil and trunc)
    return Scalar(sg.call(f"llvm.{node.op}", a.v.type, a.v), a.dt)


@elementwise("frac", check=lambda n: _no_bool(n) or (
    None if is_float(n.inputs[0].type.dtype) else "integer operand"))
def _frac(sg, node, a):
    return sg.sub(a, Scalar(sg.call("llvm.trunc", a.v.type, a.v), a.dt))


# ---- random fills (elementwise maps of the draws) --------------------------------------------

def _floats(node):
    if not is_float(node.outputs[0].type.dtype):
        return "a non-float result"
    return None


_FUSED = ("float32", "float64")


def _typed(dt, *values):
    t = np.dtype(dt).type
    return [t(v) for v in values]


@elementwise("uniform", check=_floats)
def _uniform(sg, node, x, u):
    dt = node.outputs[0].type.dtype
    lo, hi = _typed(dt, node.attrs.get("low", 0.0), node.attrs.get("high", 1.0))
    if dt in _FUSED:        # (as ir/ops_fill.py's: ATen's fused u * (high - low) + low)
        return sg.fused(sg.cast(u, dt), sg.const(hi - lo, dt), sg.const(lo, dt))
    return sg.add(sg.const(lo, dt), sg.mul(sg.const(hi - lo, dt), sg.cast(u, dt)))


@elementwise("normal", check=_floats)
def _normal(sg, node, x, n):
    dt = node.outputs[0].type.dtype
    mean, std = node.attrs.get("mean", 0.0), node.attrs.get("std", 1.0)
    if dt in _FUSED:        # (as ir/ops_fill.py's: in float64 for float64 draws)
        cdt = "float64" if n.dt == "float64" else dt
        mean, std = _typed(cdt, mean, std)
        return sg.cast(sg.fused(n, sg.const(std, cdt), sg.const(mean, cdt)), dt)
    mean, std = _typed(dt, mean, std)
    return sg.add(sg.const(mean, dt), sg.mul(sg.const(std, dt), sg.cast(n, dt)))


def _below(sg, u, p):
    p = sg.const(p, u.dt) if not isinstance(p, Scalar) else sg.cast(p, u.dt)
    return sg.cmp("<", u, p)


@elementwise("bernoulli")
def _bernoulli(sg, node, p, u):
    return sg.cast(_below(sg, u, p), node.outputs[0].type.dtype)


@elementwise("bernoulli_p")
def _bernoulli_p(sg, node, x, p, u):
    return sg.cast(_below(sg, u, p), node.outputs[0].type.dtype)
