"""IR graph -> one LLVM module with one exported entry, compiled into a Kernel.

    void entry(i8** bufs)

bufs holds one pointer per buffer: the graph inputs (their arrays' data pointers), then the
output buffers (allocated contiguous by the caller), then the scratch buffers (one arena
allocated once per kernel). The entry calls one internal function per group (see plan.py)
with the group's buffers as `noalias` arguments, so its loops vectorise without run-time
alias checks.

`supports(graph)` says whether every node has a lowering (and the first that has none);
`lower(graph)` raises Unsupported naming that node otherwise."""
import re
import threading

import numpy as np
from llvmlite import ir

from ..ir.decompose import decompose_norms
from ..ir.graph import Value
from ..ir.ops_control import CONTROL
from ..ir.optable import OPS
from ..ir.passes import cse, dce
from ..ir.verify import verify
from .schedule import dedupe
from .native import jit
from .native.blas import gemm_symbols
from .lowerings.parallel import _CREATE as THREAD_CALL
from .lowerings.pool import ensure_pool
from .lowerings import (ops_advindex, ops_elementwise, ops_index, ops_loss, ops_matmul, ops_norm,
                        ops_positional, ops_random, ops_reduce, ops_strided)
from . import (control as ops_control)  # noqa: F401  (cond, while_loop: regions as internal functions)
from .schedule.cluster import emit_cluster
from .schedule.dedupe import group_key
from .lowerings.fusion import emit_elementwise
from .kernel import Kernel
from .lowerings.loops import FuncGen
from .lowerings.ops_matmul import small_gemm_bound
from .schedule.plan import Plan, live_nodes, root_of
from .schedule.rows import emit_rows, prepare_rows
from .lowerings.scalar import DTYPES, I64, PTR, mem_type
from .lowerings.table import LOWERINGS, register

for _name, _op in OPS.items():
    if _op.kind == "view" and _name not in LOWERINGS:
        register(_name, "view")

_build_lock = threading.Lock()


class Unsupported(NotImplementedError):
    def __init__(self, node, reason):
        self.node, self.reason = node, reason
        where = f" ({node.loc})" if node is not None and node.loc else ""
        what = f"node `{node.op}`{where}" if node is not None else "graph"
        super().__init__(f"llvm backend: cannot lower {what}: {reason}")


def _extent(t):
    """(lowest, highest) element offsets a type reaches from its first element."""
    lo = sum((n - 1) * s for n, s in zip(t.shape, t.strides) if s < 0)
    hi = sum((n - 1) * s for n, s in zip(t.shape, t.strides) if s > 0)
    return lo, hi


def unsupported(graph):
    """(node, reason) of the first node that cannot be lowered, or None (dead nodes, which
    no output depends on, are not compiled and do not count)."""
    for v in graph.inputs:
        if v.type.dtype not in DTYPES:
            return None, f"input %{v.name} has dtype {v.type.dtype}"
    for node in live_nodes(graph):
        low = LOWERINGS.get(node.op)
        if low is None:
            return node, "no lowering for this op"
        for o in node.outputs:
            if o.type.dtype not in DTYPES:
                return node, f"dtype {o.type.dtype}"
        for x in node.inputs:
            if isinstance(x, Value) and x.type.dtype not in DTYPES:
                return node, f"operand dtype {x.type.dtype}"
        if low.kind == "view":
            reason = _check_view(node)
        elif len(node.outputs) != 1 and low.kind != "kernel":
            reason = "several results"          # (kernels write one buffer per result)
        else:
            reason = low.check(node) if low.check else None
        if reason:
            return node, reason
    return None


def _check_view(node):
    """A view must stay inside its root's elements (native code never reads outside)."""
    for o in node.outputs:
        t = o.type
        if t.numel == 0:
            continue
        root = root_of(o)
        if t.dtype != root.type.dtype:
            return "a view changing dtype"
        rel = t.offset - root.type.offset
        lo, hi = _extent(t)
        if root.node is None:                      # a graph input: its own reach
            rlo, rhi = _extent(root.type)
        else:                                      # a contiguous buffer
            rlo, rhi = 0, root.type.numel - 1
        if rel + lo < rlo or rel + hi > rhi:
            return "a view reaching outside its base"
    return None


def blas_available():
    return bool(gemm_symbols())


def supports(graph):
    """(True, None) when lower(graph) can compile it, else (False, the first bad node)."""
    bad = unsupported(graph)
    return (True, None) if bad is None else (False, bad[0])


def lower(graph, *, blas=True, opt=True, clusters=True, release=()):
    """Compile graph to a Kernel (raises Unsupported when supports(graph) is False).

    release: positions of inputs the caller lets go of during the call (a backward's saved
    values). Where every read of them comes before the groups that first write some large
    outputs, the entry is split in two (release_split): the launch drops its references
    to those inputs after the first part and only then allocates the late outputs, so the
    saved activations and the big gradients are not all alive at once.

    The code is looked up by its key (the graph's IR text and the options, see
    jit.key_for) in memory and in the disk cache first; a hit skips building the LLVM
    module, optimisation and code generation. The plan is always rebuilt from the graph
    (cheap, and the Kernel needs it), so a hit runs exactly the code that plan describes."""
    bad = unsupported(graph)
    if bad is not None:
        raise Unsupported(*bad)
    traced, graph = graph, simplify(graph)
    options = {"blas": blas and blas_available(), "small_gemm": small_gemm_bound()}
    plan = plan_graph(graph, options, clusters)
    split = release_split(plan, release)
    key = jit.key_for(str(graph), f"blas={options['blas']};small_gemm={options['small_gemm']};"
                                  f"opt={opt};split={split and split[0]};{plan.describe()}")
    name = f"llgrad_{re.sub(r'[^0-9A-Za-z_]', '_', graph.name)[:40]}_{key[:16]}"
    with _build_lock:               # one build per key, even from several threads
        compiled = jit.lookup(key, name, before_load=_pool_if_threaded)
        if compiled is None:
            mod = jit.new_module(name)
            emit_plan(mod, plan, name, split=split and split[0])
            if THREAD_CALL in mod.globals:
                ensure_pool()
            compiled = jit.compile_module(mod, [name], opt=opt, key=key)
    kernel = Kernel(traced, plan, compiled, name, split)
    kernel.cache_key = key
    return kernel


def _pool_if_threaded(ir_text):
    """A kernel that starts threads gets the pool's (pool.py), if its IR calls for them:
    built before the kernel's code is linked, and only then (most kernels never thread)."""
    if THREAD_CALL in ir_text:
        ensure_pool()


def simplify(graph):
    """The graph the native code computes: composite norms as the primitives their VJPs
    recompute (ir/decompose.py), then common subexpressions merged (a joint forward and
    backward recomputes the same statistics) and dead code dropped. Inputs, outputs (by
    position), mutated inputs and guards keep their places, so the Kernel answers in terms
    of the traced graph."""
    if any(n.op in CONTROL for n in graph.nodes):
        return graph            # (regions are planned with their own Values: keep them)
    out = graph
    for p in PASSES:
        out = p(out)
        verify(out)
    # unchanged: keep the traced graph itself (its Values are the ones tests and dumps see)
    return graph if len(out.nodes) == len(graph.nodes) and \
        [n.op for n in out.nodes] == [n.op for n in graph.nodes] else out


PASSES = (decompose_norms, cse, dce)    # the pipeline simplify runs, in order


def plan_graph(graph, options, clusters=True):
    """A finalized Plan of graph (every group's prepare run): also how ops_control plans
    a control-flow node's regions, with the options of the graph holding it."""
    plan = _prepared(Plan(graph, clusters=clusters), options)
    if plan.flags and plan.in_place and not _checks_first(plan):
        # an index check after a write into an input: the writes are staged instead (the
        # kernel returns at a failed check, before any later group runs: _entry)
        plan = _prepared(Plan(graph, clusters=clusters, stage_writes=True), options)
    plan.finalize()
    return plan


def _checks_first(plan):
    """Whether every group with an error flag runs before every group that writes an
    input's final value into the input itself."""
    last_check = max(b.first for b, _ in plan.flags)
    writers = [grp.index for grp in plan.groups if any(v in plan.in_place for v in grp.results)]
    return last_check < min(writers)


def _prepared(plan, options):
    plan.options = options
    for grp in plan.groups:
        low = LOWERINGS[grp.root.op]
        if grp.kind == "rows":
            prepare_rows(plan, grp)
        elif low.prepare and grp.kind != "cluster":
            low.prepare(plan, grp)
    return plan


# a split pays for itself only where this much memory is at stake, on either side
SPLIT_MIN_BYTES = 1 << 18


def release_split(plan, release):
    """(first group of the tail, slots of the outputs the tail allocates, released input
    positions) or None: the tail starts after the last group that reads a released input;
    its late outputs are those no group before it touches. An input a result is made from
    (returned, or a view of it returned) or that is written in place is never let go of."""
    if not release or plan.stacks or plan.lengths:
        return None
    kept = {id(plan.buffers[root_of(v)]) for v in plan.escaping} | \
        {id(plan.buffers[plan.graph.inputs[k]]) for k in plan.graph.mutated}
    bufs = {id(plan.buffers[v]): k for k, v in enumerate(plan.graph.inputs)
            if k in release and v in plan.buffers and id(plan.buffers[v]) not in kept}
    touched = [{id(b) for b in plan.group_buffers(g)} for g in plan.groups]
    reads = [i for i, t in enumerate(touched) if any(b in t for b in bufs)]
    start = reads[-1] + 1 if reads else 0
    if start == 0 or start >= len(plan.groups):
        return None
    early = set().union(*touched[:start])
    late = [b for b in plan.outputs if id(b) not in early]
    released = sorted(set(bufs.values()))
    freed = sum(plan.buffers[plan.graph.inputs[k]].nbytes for k in released)
    if sum(b.nbytes for b in late) < SPLIT_MIN_BYTES or freed < SPLIT_MIN_BYTES:
        return None
    return start, tuple(b.slot for b in late), tuple(released)


def emit_plan(mod, plan, name, prefix="const", split=None):
    """A planned graph's functions in mod (one per group, and the entry `name` taking the
    pointer array): (the entry, {constant Buffer: its global}). ops_control emits regions
    with this, under their own names and constant prefixes. With split (a group index),
    `name` runs the groups before it and `name + TAIL` the rest (release_split)."""
    consts = _constants(mod, plan, prefix)
    calls, seen = [], {}
    # where inputs are written in place, a failed index check returns at once: nothing is
    # written (plan_graph puts every check before the first such write)
    flags = {id(b) for b, _ in plan.flags} if plan.in_place else set()
    for grp in plan.groups:
        bufs = plan.group_buffers(grp)
        key = group_key(plan, grp, bufs)
        fn = seen.get(key) if key is not None else None
        if fn is None:                  # (else: a repeated subgraph, compiled once)
            fn = _emit_group(mod, plan, grp, bufs, f"{name}.g{grp.index}")
            if key is not None:
                seen[key] = fn
        elif dedupe.CHECK:              # (the test suite: the key must imply the code)
            dedupe.check_same(mod, fn, lambda n, g=grp, b=bufs: _emit_group(mod, plan, g, b, n))
        calls.append((fn, bufs, [b for b in grp.temps if id(b) in flags]))
    if split:
        _entry(mod, name + TAIL, calls[split:], consts)
        calls = calls[:split]
    return _entry(mod, name, calls, consts), consts


TAIL = "_tail"


def _emit_group(mod, plan, grp, bufs, name):
    fg = FuncGen(mod, f"{name}.{grp.kind}.{grp.root.op}", bufs)
    low = LOWERINGS[grp.root.op]
    if grp.kind == "cluster":
        emit_cluster(plan, grp, fg)
    elif grp.kind == "rows":
        emit_rows(plan, grp, fg)
    elif low.kind == "elementwise":
        emit_elementwise(plan, grp, fg)
    else:
        low.emit(plan, grp, fg)
    fn = fg.finish()
    # each group is optimised on its own: inlined into the entry, a graph of n groups became
    # one function that LLVM's passes take quadratic time over
    fn.attributes.add("noinline")
    return fn


def _constants(mod, plan, prefix="const"):
    out = {}
    for k, (v, buf) in enumerate((v, b) for v, b in plan.buffers.items()
                                 if b.kind == "constant"):
        node = v.node
        arr = np.asarray(node.attrs["value"], dtype=node.attrs["dtype"]).ravel()
        et = mem_type(buf.dtype)
        items = [ir.Constant(et, float(x) if arr.dtype.kind == "f" else int(x)) for x in arr]
        if not items:
            items = [ir.Constant(et, 0)]
        gv = ir.GlobalVariable(mod, ir.ArrayType(et, len(items)), name=f"{prefix}{k}")
        gv.initializer = ir.Constant(ir.ArrayType(et, len(items)), items)
        gv.global_constant = True
        gv.linkage = "private"
        gv.align = 64
        out[buf] = gv
    return out


def _entry(mod, name, calls, consts):
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [PTR]), name=name)
    fn.attributes.add("nounwind")
    bufs = fn.args[0]
    bufs.name = "bufs"
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    ptrs = {}
    for gfn, gbufs, checks in calls:
        args = []
        for buf in gbufs:
            if buf.kind == "constant":
                args.append(consts[buf])
                continue
            p = ptrs.get(buf)
            if p is None:
                slot = b.gep(bufs, [ir.Constant(I64, buf.slot)], inbounds=True,
                             source_etype=PTR)
                p = ptrs[buf] = b.load(slot, typ=PTR, name=f"buf{buf.slot}")
            args.append(p)
        b.call(gfn, args)
        for flag in checks:
            word = b.load(ptrs[flag], typ=I64)
            with b.if_then(b.icmp_signed("!=", word, ir.Constant(I64, 0)), likely=False):
                b.ret_void()
    b.ret_void()
    return fn
