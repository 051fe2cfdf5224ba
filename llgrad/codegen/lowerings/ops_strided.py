"""The flat-buffer ops behind view VJPs: strided_scatter, strided_gather, strided_put.

A geometry (shape, strides, offset) addresses elements of a 1-D buffer. The geometry is a
static attribute, so the bounds check the reference does at run time (check_geometry) is
done here once, at compile time: a geometry reaching outside its buffer (or with negative
strides) is refused by check() and the graph runs in the interpreter, which raises. Native
code therefore never writes outside a buffer.

strided_scatter: zero-fill `span` elements, then write x through the geometry; when the
geometry may overlap (optable.geometry_overlaps, the reference's own test) the writes
accumulate in C order, as the reference's np.add.at does. strided_gather: read through
the geometry. strided_put: copy the buffer, then write values (broadcast) through the
geometry; an overlapping put (whose result depends on NumPy's write order) is refused."""
from ...ir.graph import Value
from ...ir.geometry import contiguous_strides, geometry_overlaps, geometry_span
from .fusion import compute_dtypes
from .loops import Access, for_range, loop_nest
from .table import register


def _geom_reason(geom, n, put=False):
    shape, strides, offset = (tuple(geom[0]), tuple(geom[1]), int(geom[2]))
    if any(d == 0 for d in shape):
        return None
    if offset < 0 or any(s < 0 for s in strides) or geometry_span(shape, strides, offset) > n:
        return "geometry out of bounds (the interpreter raises)"
    if put and geometry_overlaps(shape, strides):
        return "an overlapping strided_put"
    return None


def _check_scatter(node):
    if not isinstance(node.inputs[0], Value):
        return "a Python-number operand"
    return _geom_reason(node.attrs["geom"], node.attrs["span"])


def _check_gather(node):
    if not isinstance(node.inputs[0], Value):
        return "a Python-number operand"
    return _geom_reason(node.attrs["geom"], node.inputs[0].type.shape[0])


def _check_put(node):
    if not isinstance(node.inputs[0], Value):
        return "a Python-number operand"
    return _geom_reason(node.attrs["geom"], node.inputs[0].type.shape[0], put=True)


def _geom_access(buf, dt, geom, base_off=0, base_stride=1):
    shape, strides, offset = geom
    return Access(buf, dt, base_off + int(offset) * base_stride,
                  tuple(int(s) * base_stride for s in strides)), tuple(shape)


def _read(fg, plan, v, dt, shape, idx):
    """Element idx of v (a Value broadcast to shape, or a Python number) as dtype dt."""
    if isinstance(v, Value):
        return fg.sg.cast(fg.load(plan.access(v, shape), idx), dt)
    return fg.sg.const(v, dt)


def _emit_scatter(plan, group, fg):
    node, b, sg = group.root, fg.b, fg.sg
    out = node.outputs[0]
    dt = out.type.dtype
    buf = plan.buffers[out]
    with for_range(b, 0, out.type.numel) as i:
        fg.store(sg.const(0, dt), Access(buf, dt, 0, (1,)), [i])
    dst, shape = _geom_access(buf, dt, node.attrs["geom"])
    if any(n == 0 for n in shape):
        return
    acc = geometry_overlaps(shape, dst.strides)
    with loop_nest(b, shape) as idx:
        v = _read(fg, plan, node.inputs[0], dt, shape, idx)
        if acc:
            v = sg.add(fg.load(dst, idx), v)
        fg.store(v, dst, idx)


def _emit_gather(plan, group, fg):
    node, b = group.root, fg.b
    out = node.outputs[0]
    dt = out.type.dtype
    src = plan.access(node.inputs[0], node.inputs[0].type.shape)
    geom = node.attrs["geom"]
    acc, shape = _geom_access(src.buf, src.dt, geom, src.offset, src.strides[0] if src.strides
                              else 0)
    if any(n == 0 for n in shape):
        return
    dst = Access(plan.buffers[out], dt, 0, contiguous_strides(shape))
    with loop_nest(b, shape) as idx:
        fg.store(fg.sg.cast(fg.load(acc, idx), dt), dst, idx)


def _emit_put(plan, group, fg):
    node, b, sg = group.root, fg.b, fg.sg
    out = node.outputs[0]
    dt = out.type.dtype
    n = out.type.numel
    buf = plan.buffers[out]
    base, values = node.inputs[0], node.inputs[1]
    cdts = compute_dtypes(node)
    flat = Access(buf, dt, 0, (1,))
    src = plan.access(base, (n,))
    with for_range(b, 0, n) as i:
        v = fg.load(src, [i])
        fg.store(sg.cast(sg.cast(v, cdts[0] or v.dt), dt), flat, [i])
    dst, shape = _geom_access(buf, dt, node.attrs["geom"])
    if any(k == 0 for k in shape):
        return
    with loop_nest(b, shape) as idx:
        if isinstance(values, Value):
            v = fg.load(plan.access(values, shape), idx)
            v = sg.cast(sg.cast(v, cdts[1] or v.dt), dt)
        else:
            v = sg.const(values, dt)
        fg.store(v, dst, idx)


register("strided_scatter", "kernel", emit=_emit_scatter, check=_check_scatter)
register("strided_gather", "kernel", emit=_emit_gather, check=_check_gather)
register("strided_put", "kernel", emit=_emit_put, check=_check_put)
