"""Data movement: cat, and the index-driven index_select and scatter_add.

Out-of-range indices. Indices are run-time data (often computed inside the graph), so they
cannot be validated before the call; these kernels clamp-and-flag: every index is wrapped
as NumPy does (-n <= i < 0 counts from the end), and one that is still outside [0, n) is
replaced by 0 (so no load or store ever leaves its buffer) and raises the group's flag, a
one-element scratch word that the group zeroes before its loop and that no other buffer
shares. After the native call Kernel reads the flags and raises IndexError (as the
reference does) instead of returning the results computed with clamped indices."""
from llvmlite import ir

from ..ir.graph import Value
from ..ir.optable import contiguous_strides
from .fusion import compute_dtypes
from .loops import Access, loop_nest
from .scalar import I64, is_float
from .table import register

_INT = ("int64", "int32", "int16", "int8", "uint8")


# ---- cat ----------------------------------------------------------------------------------

def _check_cat(node):
    out = node.outputs[0]
    if not all(isinstance(x, Value) for x in node.inputs):
        return "a Python-number operand"
    if any(len(x.type.shape) != len(out.type.shape) for x in node.inputs):
        return "operands of another rank"
    return None


def _emit_cat(plan, group, fg):
    node, b, sg = group.root, fg.b, fg.sg
    out = node.outputs[0]
    dt = out.type.dtype
    nd = len(out.type.shape)
    dim = node.attrs["dim"] % nd
    ostr = contiguous_strides(out.type.shape)
    buf = plan.buffers[out]
    off = 0
    for x in node.inputs:
        shape = x.type.shape
        if all(n > 0 for n in shape):
            src = plan.access(x, shape)
            dst = Access(buf, dt, off * ostr[dim], ostr)
            with loop_nest(b, shape) as idx:
                fg.store(sg.cast(fg.load(src, idx), dt), dst, idx)
        off += shape[dim]


register("cat", "kernel", emit=_emit_cat, check=_check_cat)


# ---- index_select / scatter_add -------------------------------------------------------------

def _prepare_flag(plan, group):
    group.state["flag"] = plan.flag(group, f"{group.root.op}: index out of range")


def _wrap_index(fg, flag, i, n):
    """i (an integer Scalar) wrapped into [0, n), or 0 with the flag raised."""
    b = fg.b
    v = fg.sg.cast(i, "int64").v
    nn = ir.Constant(I64, n)
    v = b.select(b.icmp_signed("<", v, ir.Constant(I64, 0)), b.add(v, nn), v)
    bad = b.or_(b.icmp_signed("<", v, ir.Constant(I64, 0)), b.icmp_signed(">=", v, nn))
    p = fg.ptrs[flag]
    b.store(b.or_(b.load(p, typ=I64), b.zext(bad, I64)), p)
    return b.select(bad, ir.Constant(I64, 0), v)


def _zero_flag(fg, flag):
    fg.b.store(ir.Constant(I64, 0), fg.ptrs[flag])


def _check_index_select(node):
    x, index = node.inputs[:2]
    if not (isinstance(x, Value) and isinstance(index, Value)):
        return "a Python-number operand"
    if index.type.dtype not in _INT:
        return f"index dtype {index.type.dtype}"
    if len(index.type.shape) > 1:
        return "an index of rank > 1"
    if node.outputs[0].type.numel and (not x.type.shape or
                                       x.type.shape[node.attrs["dim"] % len(x.type.shape)] == 0):
        return "selecting from an empty dim"
    return None


def _emit_index_select(plan, group, fg):
    node, b, sg = group.root, fg.b, fg.sg
    x, index = node.inputs[:2]
    out = node.outputs[0]
    flag = group.state["flag"]
    _zero_flag(fg, flag)
    if out.type.numel == 0:
        return
    nd = len(x.type.shape)
    dim = node.attrs["dim"] % nd
    ni = len(index.type.shape)
    src = plan.access(x, x.type.shape)
    iacc = plan.access(index, index.type.shape)
    dst = Access(plan.buffers[out], out.type.dtype, 0, contiguous_strides(out.type.shape))
    with loop_nest(b, out.type.shape) as idx:
        i = fg.load(iacc, idx[dim:dim + ni])
        j = _wrap_index(fg, flag, i, x.type.shape[dim])
        xi = idx[:dim] + [j] + idx[dim + ni:]
        fg.store(sg.cast(fg.load(src, xi), out.type.dtype), dst, idx)


def _check_scatter_add(node):
    x, index, src = node.inputs[:3]
    if not all(isinstance(v, Value) for v in (x, index, src)):
        return "a Python-number operand"
    if index.type.dtype not in _INT:
        return f"index dtype {index.type.dtype}"
    if not x.type.shape or len(index.type.shape) != len(x.type.shape):
        return "an index of another rank"
    dts = compute_dtypes(node)
    if node.outputs[0].type.dtype == "bool" or (dts[2] and not is_float(dts[2])
                                                and is_float(node.outputs[0].type.dtype)):
        return "bool result"
    if index.type.numel and x.type.shape[node.attrs["dim"] % len(x.type.shape)] == 0:
        return "scattering into an empty dim"
    return None


def _emit_scatter_add(plan, group, fg):
    node, b, sg = group.root, fg.b, fg.sg
    x, index, src = node.inputs[:3]
    out = node.outputs[0]
    dt = out.type.dtype
    flag = group.state["flag"]
    _zero_flag(fg, flag)
    shape = x.type.shape
    dim = node.attrs["dim"] % len(shape)
    dst = Access(plan.buffers[out], dt, 0, contiguous_strides(shape))
    if out.type.numel:
        xa = plan.access(x, shape)
        with loop_nest(b, shape) as idx:
            fg.store(sg.cast(fg.load(xa, idx), dt), dst, idx)
    ishape = index.type.shape
    if index.type.numel == 0:
        return
    ia = plan.access(index, ishape)
    sa = plan.access(src, src.type.shape)
    with loop_nest(b, ishape) as idx:                 # C order: np.add.at's order
        j = _wrap_index(fg, flag, fg.load(ia, idx), shape[dim])
        oi = idx[:dim] + [j] + idx[dim + 1:]
        v = sg.cast(fg.load(sa, idx), dt)
        fg.store(sg.add(fg.load(dst, oi), v), dst, oi)


register("index_select", "kernel", emit=_emit_index_select, prepare=_prepare_flag,
         check=_check_index_select)
register("scatter_add", "kernel", emit=_emit_scatter_add, prepare=_prepare_flag,
         check=_check_scatter_add)
