"""Data movement: cat and stack, and the index-driven index_select, scatter_add, gather,
index_add and embedding.

Out-of-range indices. Indices are run-time data (often computed inside the graph), so they
cannot be validated before the call; these kernels clamp-and-flag: an index outside [0, n)
(PyTorch's range for these ops; advanced indexing also counts -n <= i < 0 from the end) is
replaced by 0 (so no load or store ever leaves its buffer) and raises the group's flag, a
one-element scratch word that the group zeroes before its loop and that no other buffer
shares. After the native call Kernel reads the flags and raises IndexError (as the
reference does) instead of returning the results computed with clamped indices."""
from llvmlite import ir

from ...ir.graph import Value
from ...ir.geometry import contiguous_strides
from .fusion import compute_dtypes
from .loops import Access, loop_nest
from .scalar import I64, is_float
from .table import register

INDEX_DTYPES = ("int64", "int32", "int16", "int8", "uint8")


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


def _check_stack(node):
    if not all(isinstance(x, Value) for x in node.inputs):
        return "a Python-number operand"
    return None


def _emit_stack(plan, group, fg):
    """Operand k goes to index k of the new dim (its elements cast to the promoted dtype)."""
    node, b, sg = group.root, fg.b, fg.sg
    out = node.outputs[0]
    dt = out.type.dtype
    dim = node.attrs["dim"] % len(out.type.shape)
    ostr = contiguous_strides(out.type.shape)
    rest = ostr[:dim] + ostr[dim + 1:]
    for k, x in enumerate(node.inputs):
        shape = x.type.shape
        if all(n > 0 for n in shape):
            src = plan.access(x, shape)
            dst = Access(plan.buffers[out], dt, k * ostr[dim], rest)
            with loop_nest(b, shape) as idx:
                fg.store(sg.cast(fg.load(src, idx), dt), dst, idx)


register("stack", "kernel", emit=_emit_stack, check=_check_stack)


# ---- index_select / scatter_add -------------------------------------------------------------

def prepare_flag(plan, group):
    group.state["flag"] = plan.flag(group, f"{group.root.op}: index out of range")


def wrap_index(fg, flag, i, n, negative=True):
    """i (an integer Scalar) wrapped into [0, n), or 0 with the flag raised. With
    negative=False (PyTorch's gather, scatter*, index_select, index_add, embedding) a value
    below 0 is out of range too, not counted from the end."""
    b = fg.b
    v = fg.sg.cast(i, "int64").v
    nn = ir.Constant(I64, n)
    if negative:
        v = b.select(b.icmp_signed("<", v, ir.Constant(I64, 0)), b.add(v, nn), v)
    bad = b.or_(b.icmp_signed("<", v, ir.Constant(I64, 0)), b.icmp_signed(">=", v, nn))
    p = fg.ptrs[flag]
    b.store(b.or_(b.load(p, typ=I64), b.zext(bad, I64)), p)
    return b.select(bad, ir.Constant(I64, 0), v)


def zero_flag(fg, flag):
    fg.b.store(ir.Constant(I64, 0), fg.ptrs[flag])


def _check_index_select(node):
    x, index = node.inputs[:2]
    if not (isinstance(x, Value) and isinstance(index, Value)):
        return "a Python-number operand"
    if index.type.dtype not in INDEX_DTYPES:
        return f"index dtype {index.type.dtype}"
    if len(index.type.shape) > 1:
        return "an index of rank > 1"
    if node.outputs[0].type.numel and (not x.type.shape or
                                       x.type.shape[node.attrs["dim"] % len(x.type.shape)] == 0):
        return "selecting from an empty dim"
    return None


def _emit_index_select(plan, group, fg):
    x, index = group.root.inputs[:2]
    _emit_take(plan, group, fg, x, index, group.root.attrs["dim"])


def _emit_take(plan, group, fg, x, index, dim):
    """out[a, i.., b] = x[a, index[i..], b] along dim: index_select (a 0-d or 1-d index)
    and embedding (dim 0, an index of any rank); each index wrapped and bounds-checked."""
    b, sg = fg.b, fg.sg
    out = group.root.outputs[0]
    flag = group.state["flag"]
    zero_flag(fg, flag)
    if out.type.numel == 0:
        return
    dim %= len(x.type.shape)
    ni = len(index.type.shape)
    src = plan.access(x, x.type.shape)
    iacc = plan.access(index, index.type.shape)
    dst = Access(plan.buffers[out], out.type.dtype, 0, contiguous_strides(out.type.shape))
    with loop_nest(b, out.type.shape) as idx:
        i = fg.load(iacc, idx[dim:dim + ni])
        j = wrap_index(fg, flag, i, x.type.shape[dim], negative=False)
        xi = idx[:dim] + [j] + idx[dim + ni:]
        fg.store(sg.cast(fg.load(src, xi), out.type.dtype), dst, idx)


def _check_scatter_add(node):
    x, index, src = node.inputs[:3]
    if not all(isinstance(v, Value) for v in (x, index, src)):
        return "a Python-number operand"
    if index.type.dtype not in INDEX_DTYPES:
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


def _copy_to_out(plan, fg, x, out):
    """out = x (cast to out's dtype), the start of an accumulating op; -> out's Access."""
    shape, dt = x.type.shape, out.type.dtype
    dst = Access(plan.buffers[out], dt, 0, contiguous_strides(shape))
    if out.type.numel:
        xa = plan.access(x, shape)
        with loop_nest(fg.b, shape) as idx:
            fg.store(fg.sg.cast(fg.load(xa, idx), dt), dst, idx)
    return dst


def _emit_scatter_add(plan, group, fg):
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
    if index.type.numel == 0:
        return
    ia = plan.access(index, ishape)
    sa = plan.access(src, src.type.shape)
    with loop_nest(b, ishape) as idx:                 # C order: np.add.at's order
        j = wrap_index(fg, flag, fg.load(ia, idx), shape[dim], negative=False)
        oi = idx[:dim] + [j] + idx[dim + 1:]
        v = sg.cast(fg.load(sa, idx), dt)
        fg.store(sg.add(fg.load(dst, oi), v), dst, oi)


register("index_select", "kernel", emit=_emit_index_select, prepare=prepare_flag,
         check=_check_index_select)
register("scatter_add", "kernel", emit=_emit_scatter_add, prepare=prepare_flag,
         check=_check_scatter_add)


# ---- gather / index_add / embedding ---------------------------------------------------------

def _check_gather(node):
    x, index = node.inputs[:2]
    if not (isinstance(x, Value) and isinstance(index, Value)):
        return "a Python-number operand"
    if index.type.dtype not in INDEX_DTYPES:
        return f"index dtype {index.type.dtype}"
    xs, ishape = x.type.shape, index.type.shape
    if not xs or len(ishape) != len(xs):
        return "an index of another rank"
    dim = node.attrs["dim"] % len(xs)
    if any(i > n for d, (i, n) in enumerate(zip(ishape, xs)) if d != dim):
        return "an index larger than the operand"
    if index.type.numel and xs[dim] == 0:
        return "gathering from an empty dim"
    return None


def _emit_gather(plan, group, fg):
    """out[i] = x[i with i[dim] replaced by index[i]] (np.take_along_axis)."""
    node, b, sg = group.root, fg.b, fg.sg
    x, index = node.inputs[:2]
    out = node.outputs[0]
    flag = group.state["flag"]
    zero_flag(fg, flag)
    if out.type.numel == 0:
        return
    dim = node.attrs["dim"] % len(x.type.shape)
    src = plan.access(x, x.type.shape)
    ia = plan.access(index, index.type.shape)
    dst = Access(plan.buffers[out], out.type.dtype, 0, contiguous_strides(out.type.shape))
    with loop_nest(b, index.type.shape) as idx:
        j = wrap_index(fg, flag, fg.load(ia, idx), x.type.shape[dim], negative=False)
        xi = idx[:dim] + [j] + idx[dim + 1:]
        fg.store(sg.cast(fg.load(src, xi), out.type.dtype), dst, idx)


def _check_index_add(node):
    x, index, src = node.inputs[:3]
    if not all(isinstance(v, Value) for v in (x, index, src)):
        return "a Python-number operand"
    if index.type.dtype not in INDEX_DTYPES:
        return f"index dtype {index.type.dtype}"
    if len(index.type.shape) != 1 or not x.type.shape:
        return "an index of rank other than 1"
    dt = node.outputs[0].type.dtype
    alpha = node.attrs.get("alpha", 1)
    if dt == "bool" or (not is_float(dt) and not isinstance(alpha, int)):
        return f"{dt} result with alpha={alpha!r}"
    shape = list(x.type.shape)
    dim = node.attrs["dim"] % len(shape)
    shape[dim] = index.type.shape[0]
    ss = src.type.shape
    if len(ss) > len(shape) or any(n not in (1, m) for n, m in zip(ss[::-1], shape[::-1])):
        return "a source that does not broadcast to the indexed shape"
    if index.type.numel and x.type.shape[dim] == 0:
        return "adding into an empty dim"
    return None


def _emit_index_add(plan, group, fg):
    """out = x; out[..., index[j], ...] += alpha * source[..., j, ...], in C order over the
    source (np.add.at's order, so repeated indices accumulate alike)."""
    node, b, sg = group.root, fg.b, fg.sg
    x, index, src = node.inputs[:3]
    out = node.outputs[0]
    dt = out.type.dtype
    flag = group.state["flag"]
    zero_flag(fg, flag)
    shape = x.type.shape
    dim = node.attrs["dim"] % len(shape)
    dst = _copy_to_out(plan, fg, x, out)
    ishape = list(shape)
    ishape[dim] = index.type.shape[0]
    if any(n == 0 for n in ishape):
        return
    alpha = node.attrs.get("alpha", 1)
    ia = plan.access(index, index.type.shape)
    sa = plan.access(src, tuple(ishape))
    cdt = compute_dtypes(node)[2] or dt
    with loop_nest(b, ishape) as idx:
        j = wrap_index(fg, flag, fg.load(ia, [idx[dim]]), shape[dim], negative=False)
        oi = idx[:dim] + [j] + idx[dim + 1:]
        v = sg.cast(sg.cast(fg.load(sa, idx), cdt), dt)
        if alpha != 1:
            v = sg.mul(v, sg.const(alpha, dt))
        fg.store(sg.add(fg.load(dst, oi), v), dst, oi)


def _check_embedding(node):
    w, idx = node.inputs[:2]
    if not (isinstance(w, Value) and isinstance(idx, Value)):
        return "a Python-number operand"
    if idx.type.dtype not in INDEX_DTYPES:
        return f"index dtype {idx.type.dtype}"
    if not w.type.shape:
        return "a 0-d weight"
    if idx.type.numel and w.type.shape[0] == 0 and node.outputs[0].type.numel:
        return "an empty weight"
    return None


def _emit_embedding(plan, group, fg):
    """out[i.., :] = weight[indices[i..], :] (padding_idx only matters to the gradient)."""
    w, index = group.root.inputs[:2]
    _emit_take(plan, group, fg, w, index, 0)


register("gather", "kernel", emit=_emit_gather, prepare=prepare_flag, check=_check_gather)
register("index_add", "kernel", emit=_emit_index_add, prepare=prepare_flag,
         check=_check_index_add)
register("embedding", "kernel", emit=_emit_embedding, prepare=prepare_flag,
         check=_check_embedding)
