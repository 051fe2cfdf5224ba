"""cond and while_loop as native branches and loops (not selects: only the taken branch runs).

A region is a Graph, so it is planned like one (lower.plan_graph: its own groups, buffers
and arena) and emitted like one (lower.emit_plan): an internal function taking a pointer
array laid out as a kernel's (the region's inputs, its output buffers, its scratch). The
control node's group calls it with an array it fills on its own stack:
  inputs   the operands' elements where they are, when the operand is laid out as the
           region input's type says; else a copy arranged in that layout (a group temp);
  outputs  the node's result buffers themselves when a region output is the root of its
           own buffer; other outputs (a region input returned as is, a constant, a view)
           are copied into the result after the call, from wherever they live;
  scratch  the region arena: one group temp of the largest region arena, placed in the
           parent's arena like any temp, so native code never allocates.
Index-checked groups inside a region raise flags in the region arena; after each call
they are ORed into flags of the parent (plan.flag), which the Kernel reads as usual.

cond loads its predicate, branches and calls the then- or else-function. while_loop keeps
each carried value in two contiguous ping-pong temps: copy the initial values in, then
(call cond -> a one-bool temp; stop when false; call body reading `cur` and writing
`nxt`; swap the two pointers) until cond fails, then copy `cur` into the results. Zero
trips give the initial values. With save=True each trip first pushes the carried values
onto growable stacks (stacks.py: realloc'd by native code, handed to NumPy and freed by
the Kernel after the call) and counts itself into the trip-count result.

A loop's backward reads its forward's stacks as graph inputs: `stack_get` copies entry i
after checking it against the stack's length (a word the Kernel writes per call; a region
gets a copy of its operand's word), and a bad index raises the group's flag.

Not lowered (the graph stays on the interpreter, with the reason in entry.kernels): a
region holding a loop that saves stacks (the backward of a loop inside a branch), whose
stacks would be region results, which are fixed-size buffers; stacks made and read in
the same graph; carried stacks."""
from llvmlite import ir

from ..ir.graph import StackType, Value
from ..ir.ops_control import regions
from ..ir.geometry import contiguous_strides
from .build import emit_plan, plan_graph, unsupported
from .lowerings.loops import element_index, loop_nest, normalize
from .lowerings.scalar import I8, I64, ITEMSIZE, PTR, mem_type
from .lowerings.stacks import emit_push, emit_reset
from .lowerings.table import register
from .schedule.plan import root_of

# ---- can it be lowered? ----------------------------------------------------------------

def _saves(region):
    """Whether a loop inside region (at any depth) saves stacks (a worklist, no recursion)."""
    todo = [region]
    while todo:
        g = todo.pop()
        for n in g.nodes:
            if n.op == "while_loop" and n.attrs.get("save"):
                return True
            todo += [r for _, r in regions(n)]
    return False


def _check(node):
    n = node.attrs.get("n_carried", 0)
    for x in node.inputs[1:] if node.op == "cond" else node.inputs[n:]:
        if isinstance(x, Value) and isinstance(x.type, StackType) and \
                root_of(x).node is not None:
            return "a stack operand made in this graph (only a stack input is read)"
    for x in node.inputs[:n]:
        if isinstance(x.type, StackType):
            return "a carried stack"
    for key, region in regions(node):
        if region.mutated or region.guards:
            return f"region '{key}' mutates an input or has guards"
        if _saves(region):      # its stacks would be region results: only a graph's are
            return f"region '{key}' holds a loop saving stacks (a growable result)"
        bad = unsupported(region)           # nested regions: as deep as the source nests
        if bad is not None:
            inner, reason = bad
            what = f"`{inner.op}`" if inner is not None else "an input"
            return f"region '{key}': {what}: {reason}"
    return None


# ---- planning ----------------------------------------------------------------------------

def _extent(t):
    lo = sum((n - 1) * s for n, s in zip(t.shape, t.strides) if s < 0)
    hi = sum((n - 1) * s for n, s in zip(t.shape, t.strides) if s > 0)
    return lo, hi


def _same_layout(t, strides):
    """Whether elements at `strides` are where region input type t reads them."""
    return isinstance(t, StackType) or t.numel == 0 or all(n == 1 or s == r
                               for n, s, r in zip(t.shape, t.strides, strides))


class _Call:
    """One region as called from a control node's group: its finalized sub-plan and the
    parent temps its inputs, outputs and flags need (decided in prepare, used in emit)."""

    def __init__(self, plan, group, key, region, src_strides):
        self.key, self.region = key, region
        self.sub = sub = plan_graph(region, plan.options)
        # per input: None (passed where it is) or (temp, element shift of its first element)
        self.arrange = []
        for v, ss in zip(region.inputs, src_strides):
            if _same_layout(v.type, ss):
                self.arrange.append(None)
            else:
                lo, hi = _extent(v.type)
                self.arrange.append((plan.temp(group, v.type.dtype, hi - lo + 1), -lo))
        self.direct = {}        # sub output Buffer -> the result index it is written to
        for k, v in enumerate(region.outputs):
            b = sub.buffers.get(v)
            if b is not None and b.role == "output" and b not in self.direct:
                self.direct[b] = k
        self.copies = [k for k, v in enumerate(region.outputs)
                       if self.direct.get(sub.buffers.get(v)) != k]
        self.spare = {b: plan.temp(group, b.dtype, b.numel) for b in sub.outputs
                      if b not in self.direct}
        self.flags = [(b, plan.flag(group, msg)) for b, msg in sub.flags]
        self.fn = self.consts = None


def _prepare(plan, group, calls):
    """calls: [(key, region, strides of what the caller passes per input)]."""
    st = group.state
    st["calls"] = {key: _Call(plan, group, key, region, ss) for key, region, ss in calls}
    size = max([c.sub.arena_bytes for c in st["calls"].values()] + [0])
    st["arena"] = plan.temp(group, "uint8", size)


def _operand_strides(plan, x):
    return None if isinstance(x.type, StackType) else plan.access(x, x.type.shape).strides


def _prepare_cond(plan, group):
    node = group.root
    ss = [_operand_strides(plan, x) for x in node.inputs[1:]]
    _prepare(plan, group, [(k, r, ss) for k, r in regions(node)])


def _prepare_while(plan, group):
    node = group.root
    n = node.attrs["n_carried"]
    ss = [contiguous_strides(x.type.shape) for x in node.inputs[:n]] + \
        [_operand_strides(plan, x) for x in node.inputs[n:]]
    _prepare(plan, group, [(k, r, ss) for k, r in regions(node)])
    st = group.state
    st["cur"] = [plan.temp(group, x.type.dtype, x.type.numel) for x in node.inputs[:n]]
    st["nxt"] = [plan.temp(group, x.type.dtype, x.type.numel) for x in node.inputs[:n]]
    st["pred"] = plan.temp(group, "bool", 1)
    st["save"] = bool(node.attrs.get("save"))


# ---- emitting ----------------------------------------------------------------------------

def _gep(b, ptr, dt, k):
    if isinstance(k, int) and k == 0:
        return ptr
    return b.gep(ptr, [ir.Constant(I64, k) if isinstance(k, int) else k], inbounds=True,
                 source_etype=mem_type(dt))


def _copy(fg, shape, dt, src, src_strides, dst, dst_strides):
    """dst[...] = src[...] over shape (pointers to first elements, element strides)."""
    if any(n == 0 for n in shape):
        return
    ext, (ss, ds), _, _ = normalize(shape, [tuple(src_strides), tuple(dst_strides)], ref=1)
    b, et = fg.b, mem_type(dt)
    with loop_nest(b, ext, name="cp") as idx:
        s = fg.sg.load(b.gep(src, [element_index(b, 0, ss, idx)], inbounds=True,
                             source_etype=et), dt)
        fg.sg.store(s, b.gep(dst, [element_index(b, 0, ds, idx)], inbounds=True,
                             source_etype=et))


def _source(plan, fg, x):
    """(pointer to x's first element, x's element strides) in the group's function; for a
    stack input (its first entry, a pointer to the word holding its length)."""
    if isinstance(x.type, StackType):
        return fg.ptrs[plan.buffers[x]], fg.ptrs[plan.lengths[x]]
    acc = plan.access(x, x.type.shape)
    return _gep(fg.b, fg.ptrs[acc.buf], acc.dt, acc.offset), acc.strides


def _call(fg, group, call, name, ins, outs):
    """Call a region: ins[k] = (pointer, strides) of input k, outs[k] = pointer to the
    contiguous buffer its result k goes to."""
    b, sub = fg.b, call.sub
    if call.fn is None:
        call.fn, call.consts = emit_plan(fg.module, sub, name, prefix=f"{name}.const")
        call.fn.linkage = "internal"
        call.slots = fg.alloca(PTR, name=f"{call.key}.bufs", count=max(sub.nslots, 1))
    arena = fg.ptrs[group.state["arena"]]
    where = {}                                  # sub Buffer -> pointer in this function
    for v, buf, (ptr, ss), arr in zip(call.region.inputs, sub.inputs, ins, call.arrange):
        if arr is not None:                     # lay the operand out as the region reads it
            temp, shift = arr
            ptr_to = _gep(b, fg.ptrs[temp], v.type.dtype, shift)
            _copy(fg, v.type.shape, v.type.dtype, ptr, ss, ptr_to, v.type.strides)
            ptr = ptr_to
        where[buf] = ptr
    for v, (_, length) in zip(call.region.inputs, ins):
        if isinstance(v.type, StackType):       # the region's own length word
            word = sub.lengths[v]
            dst = b.gep(arena, [ir.Constant(I64, word.offset)], inbounds=True,
                        source_etype=I8)
            b.store(b.load(length, typ=I64), dst)
    for buf in sub.outputs:
        k = call.direct.get(buf)
        where[buf] = outs[k] if k is not None else fg.ptrs[call.spare[buf]]
    for buf in sub.scratch:
        where[buf] = b.gep(arena, [ir.Constant(I64, buf.offset)], inbounds=True,
                           source_etype=I8)
    where.update(call.consts)
    for buf in sub.inputs + sub.outputs + sub.scratch:
        slot = b.gep(call.slots, [ir.Constant(I64, buf.slot)], inbounds=True,
                     source_etype=PTR)
        b.store(where[buf], slot)
    b.call(call.fn, [call.slots])
    for buf, parent in call.flags:              # a region's raised flag is the node's
        word = b.load(where[buf], typ=I64)
        p = fg.ptrs[parent]
        b.store(b.or_(b.load(p, typ=I64), word), p)
    for k in call.copies:                       # results that are not their own buffers
        v = call.region.outputs[k]
        root = root_of(v)
        t = v.type
        src = _gep(b, where[sub.buffers[root]], t.dtype, t.offset - root.type.offset)
        _copy(fg, t.shape, t.dtype, src, t.strides, outs[k], contiguous_strides(t.shape))


def _start(group, fg):
    """Zero the flags this group raises (its regions' index checks)."""
    for call in group.state["calls"].values():
        for _, parent in call.flags:
            fg.b.store(ir.Constant(I64, 0), fg.ptrs[parent])


def _emit_cond(plan, group, fg):
    node, b = group.root, fg.b
    _start(group, fg)
    calls = group.state["calls"]
    pred = node.inputs[0]
    p, _ = _source(plan, fg, pred)
    taken = fg.sg.truth(fg.sg.load(p, pred.type.dtype))
    ins = [_source(plan, fg, x) for x in node.inputs[1:]]
    outs = [fg.ptrs[plan.buffers[v]] for v in node.outputs]
    with b.if_else(taken) as (then, other):
        with then:
            _call(fg, group, calls["then"], f"{fg.fn.name}.then", ins, outs)
        with other:
            _call(fg, group, calls["else"], f"{fg.fn.name}.else", ins, outs)


def _emit_while(plan, group, fg):
    node, b, st = group.root, fg.b, group.state
    _start(group, fg)
    n = node.attrs["n_carried"]
    shapes = [(x.type.shape, x.type.dtype) for x in node.inputs[:n]]
    rest = [_source(plan, fg, x) for x in node.inputs[n:]]
    cur, nxt = [], []                           # the ping-pong pointers, swapped per trip
    trips = fg.alloca(I64, name="trips")
    b.store(ir.Constant(I64, 0), trips)
    if st["save"]:
        for v in node.outputs[n + 1:]:
            emit_reset(b, fg.ptrs[plan.buffers[v]])
    for k, x in enumerate(node.inputs[:n]):
        src, ss = _source(plan, fg, x)
        a = fg.ptrs[st["cur"][k]]
        _copy(fg, x.type.shape, x.type.dtype, src, ss, a, contiguous_strides(x.type.shape))
        cur.append(fg.alloca(PTR, name=f"cur{k}"))
        nxt.append(fg.alloca(PTR, name=f"nxt{k}"))
        b.store(a, cur[-1])
        b.store(fg.ptrs[st["nxt"][k]], nxt[-1])
    head = b.append_basic_block("loop.head")
    body = b.append_basic_block("loop.body")
    done = b.append_basic_block("loop.done")
    b.branch(head)
    b.position_at_end(head)
    now = [b.load(c, typ=PTR) for c in cur]
    ins = [(p, contiguous_strides(s)) for p, (s, _) in zip(now, shapes)] + rest
    pred = fg.ptrs[st["pred"]]
    _call(fg, group, st["calls"]["cond"], f"{fg.fn.name}.cond", ins, [pred])
    b.cbranch(fg.sg.truth(fg.sg.load(pred, "bool")), body, done)
    b.position_at_end(body)
    if st["save"]:                              # this iteration's values, for the backward
        _push(fg, b, plan, node, now, shapes, trips)
    new = [b.load(c, typ=PTR) for c in nxt]
    _call(fg, group, st["calls"]["body"], f"{fg.fn.name}.body", ins, new)
    for c, x, p, q in zip(cur, nxt, now, new):
        b.store(q, c)
        b.store(p, x)
    b.branch(head)
    b.position_at_end(done)
    for k, (c, (shape, dt)) in enumerate(zip(cur, shapes)):
        dense = contiguous_strides(shape)
        _copy(fg, shape, dt, b.load(c, typ=PTR), dense,
              fg.ptrs[plan.buffers[node.outputs[k]]], dense)
    if st["save"]:
        b.store(b.load(trips, typ=I64), fg.ptrs[plan.buffers[node.outputs[n]]])


def _push(fg, b, plan, node, now, shapes, trips):
    """Append each carried value to its stack and count the trip."""
    n = len(shapes)
    for k, (p, (shape, dt)) in enumerate(zip(now, shapes)):
        desc = fg.ptrs[plan.buffers[node.outputs[n + 1 + k]]]
        numel = 1
        for d in shape:
            numel *= d
        dense = contiguous_strides(shape)
        emit_push(fg, desc, numel * ITEMSIZE[dt],
                  lambda at, p=p, shape=shape, dt=dt, dense=dense:
                  _copy(fg, shape, dt, p, dense, at, dense))
    b.store(b.add(b.load(trips, typ=I64), ir.Constant(I64, 1)), trips)


def _check_stack_get(node):
    if root_of(node.inputs[0]).node is not None:
        return "a stack made in this graph (only a stack input is read)"
    return None


def _prepare_stack_get(plan, group):
    group.state["flag"] = plan.flag(group, "stack_get: index out of range")


def _emit_stack_get(plan, group, fg):
    """Copy entry i of a stack input (i < 0 counts from the end, as NumPy's indexing); an
    index outside [-n, n) reads nothing: the result is zeros and the flag raised."""
    node, b, sg = group.root, fg.b, fg.sg
    stack, i = node.inputs
    t = node.outputs[0].type
    flag = fg.ptrs[group.state["flag"]]
    b.store(ir.Constant(I64, 0), flag)
    data, length = _source(plan, fg, stack)
    k = sg.cast(sg.load(_source(plan, fg, i)[0], i.type.dtype), "int64").v
    n = b.load(length, typ=I64)
    k = b.select(b.icmp_signed("<", k, ir.Constant(I64, 0)), b.add(k, n), k)
    dense = contiguous_strides(t.shape)
    dst = fg.ptrs[plan.buffers[node.outputs[0]]]
    with b.if_else(b.icmp_unsigned("<", k, n)) as (good, bad):    # (unsigned: k >= 0 too)
        with good:
            at = b.gep(data, [b.mul(k, ir.Constant(I64, t.numel))], inbounds=True,
                       source_etype=mem_type(t.dtype))
            _copy(fg, t.shape, t.dtype, at, dense, dst, dense)
        with bad:
            b.store(ir.Constant(I64, 1), flag)
            if t.numel:
                with loop_nest(b, [t.numel], name="zero") as idx:
                    sg.store(sg.const(0, t.dtype), _gep(b, dst, t.dtype, idx[0]))


register("stack_get", "kernel", emit=_emit_stack_get, prepare=_prepare_stack_get,
         check=_check_stack_get)
register("cond", "kernel", emit=_emit_cond, prepare=_prepare_cond, check=_check)
register("while_loop", "kernel", emit=_emit_while, prepare=_prepare_while, check=_check)
