"""From a graph to LLVM functions: which graphs native code covers (`unsupported`), the
graph native code computes (`simplify`), its plan with every group's lowering prepared
(`plan_graph`), and the module's functions: one per group and the entry that calls them
in order (`emit_plan`).

    void entry(i8** bufs)

bufs holds one pointer per buffer: the graph inputs (their arrays' data pointers), then the
output buffers (allocated contiguous by the caller), then the scratch buffers (one arena
allocated once per kernel). The entry calls one internal function per group (see
schedule/plan.py) with the group's buffers as `noalias` arguments, so its loops vectorise
without run-time alias checks. control.py plans and emits cond / while_loop regions with
these too; lower.py builds a Kernel from them."""
import numpy as np
from llvmlite import ir

from ..ir.complex_regions import complex_regions
from ..ir.block_split import split_blocks
from ..ir.decompose import expand_composites, expand_composites_in_regions
from ..ir.fresh_clones import clones_dropped
from ..ir.gemm_sums import merge_product_sums
from ..ir.scatter_sums import merge_scatter_sums
from ..ir.transposed_copies import products_untransposed, read_untransposed
from ..ir.graph import Value
from ..ir.ops_control import CONTROL
from ..ir.optable import OPS
from ..ir.passes import cse, dce, sink_free_nodes
from ..ir.verify import verify
from . import entry_table
from .entry_table import emit_table_entry
from .kernel import TAIL
from .lowerings import (ops_copy, ops_elementwise, ops_index,  # noqa: F401
                        ops_matmul, ops_norm, ops_random, ops_reduce, ops_select,
                        ops_strided, ops_tensor)      # (their import fills the lowering table)
from .lowerings import ops_activations  # noqa: F401  (issue 21: the activations)
from .lowerings import ops_fill_more  # noqa: F401  (random_, exponential_, ..., normal)
from .lowerings import host_call  # noqa: F401  (the LAPACK ops: a call back into NumPy)
from .lowerings.fusion import emit_elementwise
from .lowerings.loops import FuncGen
from .lowerings.scalar import DTYPES, I8, I64, ITEMSIZE, OPAQUE, PTR, mem_type
from .lowerings.table import LOWERINGS, defer, register
from .native.blas import gemm_symbols
from .schedule import dedupe
from .schedule.cluster import emit_cluster, merge_loops
from .schedule.concat import merge_concats
from .schedule.copy_into import merge_copies
from .schedule.dedupe import group_key
from .schedule.kernel_io import merge_kernel_io
from .schedule.plan import Plan, live_nodes, root_of
from .schedule.rows import emit_rows, merge_rows, prepare_rows

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
    for v in graph.inputs:     # (complex ones: buffers only complex_region nodes read)
        if v.type.dtype not in DTYPES and v.type.dtype not in OPAQUE:
            return None, f"input %{v.name} has dtype {v.type.dtype}"
    for node in live_nodes(graph):
        low = LOWERINGS.get(node.op)
        if low is None:
            return node, "no lowering for this op"
        # (complex values: the operands and results of complex_region and views of them)
        known = DTYPES | OPAQUE if node.op == "complex_region" or low.form == "view" else DTYPES
        for o in node.outputs:
            if o.type.dtype not in known:
                return node, f"dtype {o.type.dtype}"
        for x in node.inputs:
            if isinstance(x, Value) and x.type.dtype not in known:
                return node, f"operand dtype {x.type.dtype}"
        if low.form == "view":
            reason = _check_view(node)
        elif len(node.outputs) != 1 and low.form != "kernel":
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
    bad = unsupported(simplify(graph))
    return (True, None) if bad is None else (False, bad[0])


def simplify(graph):
    """The graph the native code computes: composite norms as the primitives their VJPs
    recompute (ir/decompose.py), an elementwise value read in last-dim blocks computed per
    block (ir/block_split.py: an LSTM step's gates, in its cell's loop), sums of small
    products as one product of stacked operands
    (ir/gemm_sums.py: a weight shared by a loop's steps), sums of scatters into disjoint
    places as one (ir/scatter_sums.py: a loop's per-step select gradients), a product's
    operand t(clone(t(x))) read as x and a product read only through its transpose computed
    transposed (ir/transposed_copies.py), a copy of a value nothing else reads dropped
    (ir/fresh_clones.py), then common subexpressions merged
    (a joint forward and backward recomputes the same statistics) and dead code dropped.
    Inputs, outputs (by position), mutated inputs and guards keep their places, so the
    Kernel answers in terms of the traced graph."""
    if any(n.op in CONTROL for n in graph.nodes):
        # (regions are planned with their own Values: only the composites, which have no
        # lowering of their own, are expanded, in the graph and in its regions)
        return verify(expand_composites_in_regions(graph))
    out = graph
    for p in PASSES:
        out = p(out)
    if out is not graph:        # (a pass that changed nothing returns its input: verified;
        verify(out)             # the passes' graph once, at the end: each verification
        # re-infers every node's type, ~6 ms a verification at 12 transformer layers)
    # unchanged: keep the traced graph itself (its Values are the ones tests and dumps see)
    return graph if len(out.nodes) == len(graph.nodes) and \
        [n.op for n in out.nodes] == [n.op for n in graph.nodes] else out


# simplify's pipeline, in order
PASSES = (expand_composites, split_blocks, read_untransposed, products_untransposed,
          clones_dropped, merge_product_sums, merge_scatter_sums, cse, dce, complex_regions,
          sink_free_nodes)


def plan_graph(graph, options, clusters=True):
    """A finalized Plan of graph (every group's prepare run): also how ops_control plans
    a control-flow node's regions, with the options of the graph holding it."""
    # elementwise code into kernels' loads and stores (kernel_io.py), row fusion (rows.py),
    # then multi-output loops (cluster.py); operands computed in place of cats (concat.py)
    # and products in place of their permuted copies (copy_into.py)
    merges = (merge_kernel_io, merge_rows, merge_loops, merge_concats, merge_copies) \
        if clusters else (merge_concats, merge_copies)
    plan = _prepared(Plan(graph, merges), options)
    if plan.flags and plan.in_place and not _checks_first(plan):
        # an index check after a write into an input: the writes up to the last check are
        # staged instead (the kernel returns at a failed check, before any later group
        # runs: _entry), so a training step whose BatchNorm writes its statistics before
        # the loss checks its targets still updates the optimiser's state in place
        last = max(b.first for b, _ in plan.flags)
        plan = _prepared(Plan(graph, merges, staged_through=last), options)
        # (the groups are the same ones, so this holds: checked should that change)
        if plan.in_place and not _checks_first(plan):
            plan = _prepared(Plan(graph, merges, stage_writes=True), options)
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
        if grp.loop == "rows":
            prepare_rows(plan, grp)
        elif low.prepare and grp.loop != "cluster":
            low.prepare(plan, grp)
    return plan


# a split pays for itself only where this much memory is at stake, on either side


def emit_plan(mod, plan, name, prefix="const", split=None, table=False):
    """A planned graph's functions in mod (one per group, and the entry `name` taking the
    pointer array): (the entry, {constant Buffer: its global}). ops_control emits regions
    with this, under their own names and constant prefixes. With split (a group index),
    `name` runs the groups before it and `name + TAIL` the rest (release_split). table:
    the entry walks plan.call_table (entry_table.py) instead of calling group by group."""
    consts = _constants(mod, plan, prefix)
    calls = group_calls(mod, plan, name)
    if table:       # (a key's function, in the order of first calls: call_table's numbering)
        fns = list(dict.fromkeys(fn for fn, *_ in calls))
        entry = emit_table_entry(mod, name, fns, list(consts.values()), plan.nslots,
                                 tail=name + TAIL if split else None)
        return entry, consts
    if split:
        _entry(mod, name + TAIL, calls[split:], consts)
        calls = calls[:split]
    return _entry(mod, name, calls, consts), consts


def call_specs(plan):
    """[(function key, group, buffers, bases, flags to check)] for each group of plan, in
    order (computed once per plan); groups of one key share one function (a key
    ("own", index): a function of its own)."""
    specs = getattr(plan, "_call_specs", None)
    if specs is None:
        # where inputs are written in place, a failed index check returns at once: nothing
        # is written (plan_graph puts every check before the first such write)
        flags = {id(b) for b, _ in plan.flags} if plan.in_place else set()
        specs = []
        for grp in plan.groups:
            bufs = plan.group_buffers(grp)
            bases = dedupe.read_bases(plan, grp, _addressed(grp))
            key = group_key(plan, grp, bufs, bases)
            specs.append((("own", grp.index) if key is None else key, grp, bufs, bases,
                          [b for b in grp.temps if id(b) in flags]))
        plan._call_specs = specs
    return specs


def call_table(plan, split=None):
    """plan's call table (entry_table.py): its groups' calls, each group's function
    numbered in the order emit_plan emits them."""
    specs = call_specs(plan)
    index = {}
    for key, *_ in specs:
        index.setdefault(key, len(index))
    return entry_table.call_table(plan, [(k, bufs, bases, checks)
                                         for k, _, bufs, bases, checks in specs], index, split)


def group_calls(mod, plan, name):
    """[(function, buffers, bases, flags to check)] for each group of plan, in order: the
    group's function in mod (`name.g<index>...`), or the one a repeated group shares."""
    calls, seen = [], {}
    for key, grp, bufs, bases, checks in call_specs(plan):
        fn = seen.get(key)
        if fn is None:                  # (else: a repeated subgraph, compiled once)
            fn = seen[key] = _emit_group(mod, plan, grp, bufs, f"{name}.g{grp.index}",
                                         bases)
        elif dedupe.CHECK:              # (the test suite: the key must imply the code)
            dedupe.check_same(mod, fn, lambda n, g=grp, b=bufs, o=bases:
                              _emit_group(mod, plan, g, b, n, o))
        calls.append((fn, bufs, bases, checks))
    return calls


def _addressed(grp):
    """Whether grp's emission reads its operands through FuncGen.address only (the fused
    loops; a kernel may compute addresses of its own from a buffer's start)."""
    return grp.loop in ("cluster", "rows") or LOWERINGS[grp.root.op].form == "elementwise"


def _emit_group(mod, plan, grp, bufs, name, bases=None):
    fg = FuncGen(mod, f"{name}.{grp.loop}.{grp.root.op}", bufs, bases)
    low = LOWERINGS[grp.root.op]
    if grp.loop == "cluster":
        emit_cluster(plan, grp, fg)
    elif grp.loop == "rows":
        emit_rows(plan, grp, fg)
    elif low.form == "elementwise":
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
                                 if b.role == "constant"):
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
    for gfn, gbufs, bases, checks in calls:
        args = []
        for buf in gbufs:
            p = consts[buf] if buf.role == "constant" else _pointer(b, bufs, ptrs, buf)
            base = bases.get(id(buf), 0)
            if base:                    # (the group reads this buffer from there on)
                p = b.gep(p, [ir.Constant(I64, base * ITEMSIZE[buf.dtype])], inbounds=True,
                          source_etype=I8)
            args.append(p)
        b.call(gfn, args)
        for flag in checks:
            word = b.load(ptrs[flag], typ=I64)
            with b.if_then(b.icmp_signed("!=", word, ir.Constant(I64, 0)), likely=False):
                b.ret_void()
    b.ret_void()
    if len(calls) > ENTRY_OPTIMISED_CALLS:
        # loads and calls only: O3 has nothing to gain there, and its passes over a deep
        # model's entry (350 calls: 12 transformer layers' backward) took 30 ms
        fn.attributes.add("optnone")
        fn.attributes.add("noinline")       # (LLVM requires it beside optnone)
    return fn


ENTRY_OPTIMISED_CALLS = 32      # an entry calling more groups is compiled as it is written


def _pointer(b, bufs, ptrs, buf):
    """buf's pointer in the entry (loaded once): its slot's, or a slice's offset into its
    parent's (schedule/concat.py)."""
    p = ptrs.get(buf)
    if p is None:
        if buf.role == "slice":
            at = ir.Constant(I64, buf.base * ITEMSIZE[buf.dtype])
            p = b.gep(_pointer(b, bufs, ptrs, buf.parent), [at], inbounds=True,
                      source_etype=I8)
        else:
            slot = b.gep(bufs, [ir.Constant(I64, buf.slot)], inbounds=True, source_etype=PTR)
            p = b.load(slot, typ=PTR, name=f"buf{buf.slot}")
        ptrs[buf] = p
    return p


def _rarer_lowerings():
    """The lowering modules of ops most graphs lack, imported on the table's first miss
    (table.defer: compiling their source took ~0.1 s of a cold process's first build)."""
    from .lowerings import ops_advindex, ops_loss, ops_positional  # noqa: F401
    from .lowerings import ops_conv, ops_sort  # noqa: F401
    from .lowerings import ops_avgpool, ops_pool2d  # noqa: F401  (max and average pooling)
    from .lowerings import ops_batch_norm_backward  # noqa: F401
    from .lowerings import ops_special  # noqa: F401  (asin ... polygamma; bitwise, gcd)
    from .lowerings import ops_linalg  # noqa: F401  (linalg_solve_triangular, cholesky)
    from .lowerings import ops_linalg_solve  # noqa: F401  (linalg_solve_ex)
    from .lowerings import ops_linalg_slogdet  # noqa: F401  (linalg_slogdet)
    from .lowerings import complex_region  # noqa: F401  (complex values: a call back, too)


defer(_rarer_lowerings)
for _name, _op in OPS.items():     # (no deferred module registers a view: registered())
    if _op.kind == "view" and not LOWERINGS.registered(_name):
        register(_name, "view")
