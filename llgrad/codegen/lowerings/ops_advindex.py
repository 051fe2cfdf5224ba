"""Advanced indexing: index (x[idx]) and index_put (x[idx] = values, or += with accumulate).

The node's spec lists the index entries: "T" (the next tensor operand: an integer index or a
bool mask), ("slice", start, stop, step), None (a new dim) and Python ints. NumPy's rules
give the result's shape statically: the advanced entries (tensors, and ints, which count as
advanced beside a tensor) broadcast to one block of dims B, placed where the advanced
entries are when they are adjacent in the spec and first otherwise; slices and Nones give
one dim each, in order. For each element of the result (in C order), every dim of x gets
its index from its entry: start + step * i for a slice, the (wrapped) int, or the tensor's
element at the B coordinates, wrapped as NumPy wraps negatives and checked (an index still
outside the dim raises the group's flag, see ops_index; the kernel then raises IndexError).

index_put writes the result's elements back into a copy of x in the same C order, so with
repeated indices the last write wins (assignment) or every value adds up in order
(accumulate, np.add.at's order), as the reference does.

Bool masks. A mask selects a data-dependent number of elements. The tracer records the
mask's True count in the node's `counts` attribute (and guards it when the mask is data,
tracer/masks.py), so the result's B dim has that static length. A mask as the only
advanced entry is lowered: the kernel loops over the mask's own dims in C order with a
counter k of the Trues met, and for each True (only the first `count` of them when the node
has counts) loops over the slices' ranges, reading or writing x there and result row k
(index) or values row k (index_put; a values dim of 1 is broadcast). So a run whose mask
has another count (which the guard then discards) never writes past the result nor reads
past the values: rows beyond the Trues met stay zero. Without counts (a graph not made by
the tracer) index with a mask is refused, and so is index_put whose values have a dim over
B other than 1."""
from llvmlite import ir

from ...ir.graph import Value
from ...ir.geometry import contiguous_strides
from .fusion import compute_dtypes
from .loops import Access, loop_nest
from .ops_index import INDEX_DTYPES, prepare_flag, wrap_index, zero_flag
from .scalar import I64
from .table import register


class _Refused(Exception):
    pass


class _Index:
    """The static structure of one spec applied to x's shape.

    entries: (kind, data) per spec entry, trailing dims filled with full slices; kind is
    "slice" (start, step, length), "int" (the wrapped value), "none", "tensor" (a Value) or
    "mask" (a Value covering several dims). dims: per result dim, ("B", k), ("slice", e) or
    ("none", e) with e the entry index. xdim[e]: the first dim of x entry e consumes."""

    def __init__(self, spec, xshape, tensors, counts=None):
        it = iter(tensors)
        self.entries, self.xdim = [], []
        d = 0
        for s in spec:
            self.xdim.append(d)
            if s == "T":
                t = next(it)
                if not isinstance(t, Value):
                    raise _Refused("a Python-number index")
                if t.type.dtype == "bool":
                    k = len(t.type.shape)
                    if k == 0 or t.type.shape != tuple(xshape[d:d + k]):
                        raise _Refused("a bool mask not shaped like the dims it covers")
                    self.entries.append(("mask", t))
                    d += k
                    continue
                if t.type.dtype not in INDEX_DTYPES:
                    raise _Refused(f"index dtype {t.type.dtype}")
                self.entries.append(("tensor", t))
            elif s is None:
                self.entries.append(("none", None))
                continue
            elif isinstance(s, tuple) and s and s[0] == "slice":
                if d >= len(xshape):
                    raise _Refused("too many indices")
                try:
                    start, stop, step = slice(*s[1:]).indices(xshape[d])
                except (TypeError, ValueError):
                    raise _Refused(f"slice {s[1:]!r}") from None
                self.entries.append(("slice", (start, step, len(range(start, stop, step)))))
            elif isinstance(s, int) and not isinstance(s, bool):
                if d >= len(xshape) or not -xshape[d] <= s < xshape[d]:
                    raise _Refused("an int index out of range (the interpreter raises)")
                self.entries.append(("int", s % xshape[d]))
            else:
                raise _Refused(f"index entry {s!r}")
            d += 1
        if d > len(xshape):
            raise _Refused("too many indices")
        while d < len(xshape):
            self.xdim.append(d)
            self.entries.append(("slice", (0, 1, xshape[d])))
            d += 1
        adv = [e for e, (k, _) in enumerate(self.entries) if k in ("tensor", "int", "mask")]
        self.masks = [e for e in adv if self.entries[e][0] == "mask"]
        if self.masks and len(adv) > 1:
            raise _Refused("a bool mask beside other advanced indices")
        shapes = [self.entries[e][1].type.shape if self.entries[e][0] == "tensor" else ()
                  for e in adv]
        self.count = None
        if self.masks:
            if counts is not None:
                if len(counts) != 1 or not 0 <= counts[0] <= self.entries[self.masks[0]][1] \
                        .type.numel:
                    raise _Refused(f"mask counts {counts!r}")
                self.count = counts[0]
            # the count (a placeholder of size 1 when the node does not fix it)
            shapes = [(1 if self.count is None else self.count,)]
        self.B = _broadcast(shapes)
        adjacent = adv == list(range(adv[0], adv[-1] + 1)) if adv else True
        block = [("B", k) for k in range(len(self.B))]
        self.dims = [] if adjacent else list(block)
        for e, (kind, _) in enumerate(self.entries):
            if adjacent and adv and e == adv[0]:
                self.dims += block
            if kind in ("slice", "none"):
                self.dims.append((kind, e))

    def shape(self):
        return tuple(self.B[d[1]] if d[0] == "B" else
                     self.entries[d[1]][1][2] if d[0] == "slice" else 1 for d in self.dims)

    def source(self, fg, plan, flag, xshape, idx):
        """x's indices (i64s) for the result's indices idx (no masks here)."""
        b = fg.b
        pos = {d: i for d, i in zip(self.dims, idx)}
        bidx = [pos[("B", k)] for k in range(len(self.B))]
        out = []
        for e, (kind, data) in enumerate(self.entries):
            if kind == "slice":
                out.append(_slice_index(b, data, pos[("slice", e)]))
            elif kind == "int":
                out.append(ir.Constant(I64, data))
            elif kind == "tensor":
                v = fg.load(plan.access(data, self.B), bidx)
                out.append(wrap_index(fg, flag, v, xshape[self.xdim[e]]))
        return out


def _broadcast(shapes):
    nd = max((len(s) for s in shapes), default=0)
    out = [1] * nd
    for s in shapes:
        for k, n in enumerate(s, nd - len(s)):
            if n != 1:
                if out[k] not in (1, n):
                    raise _Refused("index shapes that do not broadcast")
                out[k] = n
    return tuple(out)


def _values_lead(vshape, shape):
    """How many leading dims of values to skip so they broadcast to the indexed shape
    (NumPy's assignment drops leading 1s); raises _Refused when they do not broadcast."""
    extra = max(len(vshape) - len(shape), 0)
    if any(n != 1 for n in vshape[:extra]) or \
            any(n not in (1, m) for n, m in zip(vshape[extra:][::-1], shape[::-1])):
        raise _Refused("values that do not broadcast to the indexed result")
    return extra


def _values_access(plan, v, shape):
    """How to read values broadcast to the indexed shape."""
    extra = _values_lead(v.type.shape, shape)
    if extra:
        acc = plan.access(v, v.type.shape)
        return acc.with_strides(acc.strides[extra:])
    return plan.access(v, shape)


def _structure(node):
    x = node.inputs[0]
    tensors = node.inputs[1:] if node.op == "index" else node.inputs[2:]
    return _Index(node.attrs["spec"], x.type.shape, tensors, node.attrs.get("counts"))


def _check(node):
    x = node.inputs[0]
    if not isinstance(x, Value):
        return "a Python-number operand"
    try:
        ix = _structure(node)
        shape = ix.shape()
        if node.op == "index":
            if ix.masks and ix.count is None:
                return "a bool mask without its count (the result's length is data-dependent)"
            if shape != node.outputs[0].type.shape:
                return "a result shape other than NumPy's"
        elif isinstance(node.inputs[1], Value):
            _values_lead(node.inputs[1].type.shape, shape)
    except _Refused as e:
        return str(e)
    if all(n > 0 for n in shape) and any(
            kind == "tensor" and x.type.shape[ix.xdim[e]] == 0
            for e, (kind, _) in enumerate(ix.entries)):
        return "indexing into an empty dim (the reference raises)"
    return None


def _emit_index(plan, group, fg):
    node, b, sg = group.root, fg.b, fg.sg
    x = node.inputs[0]
    out = node.outputs[0]
    flag = group.state["flag"]
    zero_flag(fg, flag)
    if out.type.numel == 0:
        return
    ix = _structure(node)
    shape = ix.shape()
    src = plan.access(x, x.type.shape)
    dst = Access(plan.buffers[out], out.type.dtype, 0, contiguous_strides(shape))
    if ix.masks:
        zero = fg.sg.const(0, out.type.dtype)
        with loop_nest(b, shape) as idx:        # rows past the Trues met stay zero
            fg.store(zero, dst, idx)

        def copy(xi, ridx):
            fg.store(sg.cast(fg.load(src, xi), out.type.dtype), dst, ridx)
        _masked_loops(plan, fg, ix, copy)
        return
    with loop_nest(b, shape) as idx:
        xi = ix.source(fg, plan, flag, x.type.shape, idx)
        fg.store(sg.cast(fg.load(src, xi), out.type.dtype), dst, idx)


def _emit_index_put(plan, group, fg):
    node, b, sg = group.root, fg.b, fg.sg
    x, values = node.inputs[:2]
    out = node.outputs[0]
    dt = out.type.dtype
    flag = group.state["flag"]
    zero_flag(fg, flag)
    xshape = x.type.shape
    dst = Access(plan.buffers[out], dt, 0, contiguous_strides(xshape))
    if out.type.numel:
        xa = plan.access(x, xshape)
        with loop_nest(b, xshape) as idx:
            fg.store(sg.cast(fg.load(xa, idx), dt), dst, idx)
    ix = _structure(node)
    shape = ix.shape()
    vdt = compute_dtypes(node)[1] or dt
    accumulate = node.attrs.get("accumulate", False)

    def value(vidx):
        if isinstance(values, Value):
            v = fg.load(_values_access(plan, values, shape), vidx)
            return sg.cast(sg.cast(v, vdt), dt)
        return sg.const(values, dt)

    if ix.masks:
        _emit_put_masked(plan, fg, ix, dst, value, accumulate)
        return
    if any(n == 0 for n in shape) or out.type.numel == 0:
        return
    with loop_nest(b, shape) as idx:
        xi = ix.source(fg, plan, flag, xshape, idx)
        v = value(idx)
        if accumulate:
            v = sg.add(fg.load(dst, xi), v)
        fg.store(v, dst, xi)


def _emit_put_masked(plan, fg, ix, dst, value, accumulate):
    """Where the mask is true, write the value (values row k for the k-th True)."""
    sg = fg.sg

    def put(xi, ridx):
        old = fg.load(dst, xi)
        v = value(ridx)
        fg.store(sg.add(old, v) if accumulate else v, dst, xi)
    _masked_loops(plan, fg, ix, put)


def _masked_loops(plan, fg, ix, body):
    """Loop over the mask's dims in C order, counting the Trues met in k; for each True
    (the first ix.count of them when the node fixes the count), loop over the slices'
    ranges and call body(x's indices, the result's indices) (the result's B index is k)."""
    b = fg.b
    (e,) = ix.masks
    mask = ix.entries[e][1]
    ma = plan.access(mask, mask.type.shape)
    ext = [data[2] for kind, data in ix.entries if kind == "slice"]
    if mask.type.numel == 0 or any(n == 0 for n in ext) or ix.count == 0:
        return
    counter = fg.alloca(I64, name="mask.k")
    b.store(ir.Constant(I64, 0), counter)
    with loop_nest(b, mask.type.shape, name="m") as mi:
        k = b.load(counter)
        on = fg.sg.truth(fg.load(ma, mi))
        if ix.count is not None:
            on = b.and_(on, b.icmp_signed("<", k, ir.Constant(I64, ix.count)))
        with b.if_then(on):
            with loop_nest(b, ext, name="s") as si:
                it = iter(si)
                xi, at = [], {}
                for j, (kind, data) in enumerate(ix.entries):
                    if kind == "mask":
                        xi += mi
                    elif kind == "slice":
                        at[j] = next(it)
                        xi.append(_slice_index(b, data, at[j]))
                zero = ir.Constant(I64, 0)
                ridx = [k if d[0] == "B" else at[d[1]] if d[0] == "slice" else zero
                        for d in ix.dims]
                body(xi, ridx)
            b.store(b.add(k, ir.Constant(I64, 1)), counter)


def _slice_index(b, data, i):
    start, step, _ = data
    i = i if step == 1 else b.mul(i, ir.Constant(I64, step))
    return b.add(i, ir.Constant(I64, start)) if start else i


register("index", "kernel", emit=_emit_index, prepare=prepare_flag, check=_check)
register("index_put", "kernel", emit=_emit_index_put, prepare=prepare_flag, check=_check)
