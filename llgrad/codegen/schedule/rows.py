"""Row fusion: fusing across partial reductions, so that a layer norm (or any chain of
statistics over the last dim) runs forward and backward in one walk over memory.

A *row cluster* runs over a shape S = (*lead, C): an outer loop over the rows (the leading
dims) and, inside it, a few *stages*, each one loop over the row's C columns. Its members:
  - S-nodes: elementwise nodes of shape S;
  - row reductions: sum/mean over the last dim (a per-row value);
  - row nodes: elementwise nodes of shape (*lead, 1) (a per-row value: mean + eps, rsqrt);
  - column reductions: sum/mean over the leading dims (shape (C,) or keepdim), accumulated
    in float64 across the rows;
  - full reductions: sum/mean over everything (the loss), accumulated in float64.
A row reduction is complete only after its stage's loop; an S-node that reads it runs in a
later stage. An S-value read in a later stage than the one that computes it goes through a
row buffer of C elements (on the stack: it stays in L1); a value needed outside the
cluster is stored to its buffer. Per-row values stay in registers for the whole row.

So `y = layer_norm(x)`, its VJP's recomputed statistics (merged with the forward's by
common-subexpression elimination, see ir/decompose.py) and the column sums of the weight
and bias gradients all run in one outer loop that reads x once and writes dx once, instead
of a dozen passes over memory.

Which groups join (greedily, in group order, like cluster.py): S-elementwise groups,
reductions over S of the kinds above, and row-shaped elementwise groups that read a row
value of the cluster. A group reading a value of the cluster must read it directly (the
same element, no view); nothing may read a column or full reduction inside the cluster
(they are complete only after the last row). A group that depends on the cluster without
joining seals it. A cluster without a row reduction, or with one group, is dissolved; the
ordinary groups (and cluster.py) take over."""
import math
from contextlib import ExitStack

from llvmlite import ir

from ...ir.graph import Value
from ...ir.geometry import contiguous_strides
from ..lowerings.fusion import Expr
from ..lowerings.loops import Access, for_range
from .merge import FusedGroup, fused_in_order, join_groups, place_fused
from ..lowerings.ops_reduce import reduced_dims
from ..lowerings.parallel import Partial, cost, parallel_range
from .plan import root_of
from ..lowerings.scalar import F64, Scalar, mem_type
from ..lowerings.table import form_of

ROW_BUFFER_BYTES = 256 * 1024   # per thread; larger rows use the ordinary groups


class RowCluster(FusedGroup):
    LOOP = "rows"


def reduction_kind(node, shape):
    """'row' / 'col' / 'full' for a float sum/mean over shape S, else None."""
    x = node.inputs[0]
    if node.op not in ("sum", "mean") or node.attrs.get("dtype") is not None \
            or tuple(x.type.shape) != shape \
            or node.outputs[0].type.dtype not in ("float32", "float64"):
        return None
    nd, dims = len(shape), reduced_dims(node)
    if dims == {nd - 1}:
        return "row"
    if dims == set(range(nd - 1)):
        return "col"
    return "full" if dims == set(range(nd)) else None


def _row_shape(shape):
    return tuple(shape[:-1]) + (1,)


def _space(grp):
    """(S, role) a group could join a row cluster over S with; None if it cannot."""
    node = grp.root
    out = node.outputs[0].type.shape
    if grp.loop == "elementwise":
        if len(out) >= 2 and all(n > 0 for n in out):
            return tuple(out), ("row" if out[-1] == 1 else "S")
        return None
    if grp.loop == "reduce" and node.op in ("sum", "mean"):
        shape = tuple(node.inputs[0].type.shape)
        if len(shape) >= 2 and all(n > 0 for n in shape) and reduction_kind(node, shape):
            return shape, "reduce"
    return None


def merge_rows(plan):
    """plan.groups with row clusters in place of their members."""
    open_by_shape = {}
    cluster_of = join_groups(plan, lambda grp, m: _cluster_for(grp, open_by_shape, m))
    keep, order = [], None
    for c in fused_in_order(cluster_of):
        if len(c.parts) >= 2 and any(p.loop == "reduce" and
                                     reduction_kind(p.root, c.shape) == "row" for p in c.parts):
            if order is None:       # (once per plan: a map per cluster was quadratic)
                order = {n: i for i, n in enumerate(plan.nodes)}
                escaping = set(plan.escaping)
            _finish(plan, c, order, escaping)
            c.state["sched"] = sched = _Schedule(c)
            if len(sched.buffered) * c.shape[-1] * 8 <= ROW_BUFFER_BYTES:
                keep.append(c)
    return place_fused(plan, cluster_of, keep)


def _cluster_for(grp, open_by_shape, m):
    sp = _space(grp)
    if sp is None:
        return None
    shape, role = sp
    if role == "row":       # joins the cluster whose row value it reads, if any
        cands = [m.cluster_of[p] for p in (m.producer.get(root_of(v)) for v in grp.leaves)
                 if p in m.cluster_of and m.cluster_of[p].shape[:-1] == shape[:-1]]
        c = cands[0] if cands else None
    else:
        c = open_by_shape.get(shape)
        if c is None or c.sealed or c.full_for(grp):
            if shape[-1] * 8 > ROW_BUFFER_BYTES:
                return None
            c = open_by_shape[shape] = RowCluster(shape)
            return c
    if c is None or c.sealed or c.full_for(grp) or not _can_join(c, grp, m):
        return None
    return c


def _can_join(c, grp, m):
    reads = m.inside_reads(c, grp)
    shapes = (tuple(c.shape), _row_shape(c.shape))
    for leaf, p in reads:
        if leaf not in p.results or root_of(leaf) is not leaf:
            return False                # a view of a value of the cluster
        if p.loop == "reduce" and reduction_kind(p.root, c.shape) != "row":
            return False                # a column or full total: complete after the rows
        if tuple(leaf.type.shape) not in shapes:
            return False
    return True


def _finish(plan, c, order, escaping):
    c.members = sorted((n for grp in c.parts for n in grp.members), key=order.__getitem__)
    inside = set(c.members)
    computed = {n.outputs[0] for n in c.members}
    c.results = [n.outputs[0] for n in c.members
                 if n.outputs[0] in escaping or form_of(n) == "reduce"
                 and reduction_kind(n, c.shape) != "row"
                 or any(m not in inside for m in plan.consumers[n.outputs[0]])]
    c.leaves = []
    for grp in c.parts:
        for x in grp.leaves:
            if x not in computed and all(x is not y for y in c.leaves):
                c.leaves.append(x)


# ---- scheduling ----------------------------------------------------------------------------
class _Schedule:
    """Stages of a row cluster: stage[node] for S-nodes and the loop a reduction
    accumulates in, ready[v] for per-row values (the stage from which they are known)."""

    def __init__(self, c):
        S = tuple(c.shape)
        self.role, self.stage, self.ready = {}, {}, {}
        member_out = {n.outputs[0] for n in c.members}
        for n in c.members:
            v = n.outputs[0]
            ins = [x for x in n.inputs if isinstance(x, Value) and x in member_out]
            if form_of(n) == "reduce":
                self.role[n] = reduction_kind(n, S)
                self.stage[n] = max([self.stage[x.node] for x in ins], default=0)
                if self.role[n] == "row":
                    self.ready[v] = self.stage[n] + 1
            elif tuple(v.type.shape) == S:
                self.role[n] = "S"
                self.stage[n] = max([self.stage[x.node] if self.role[x.node] == "S"
                                     else self.ready[x] for x in ins], default=0)
            else:
                self.role[n] = "rownode"
                self.ready[v] = max([self.ready[x] for x in ins], default=0)
        self.nstages = 1 + max([s for n, s in self.stage.items()], default=0)
        # S-values read in a later stage than the one computing them: row buffers
        self.buffered = []
        for n in c.members:
            for x in n.inputs:
                if isinstance(x, Value) and x in member_out and self.role[x.node] == "S" \
                        and self.stage[n] > self.stage[x.node] \
                        and all(x is not y for y in self.buffered):
                    self.buffered.append(x)


def prepare_rows(plan, c):
    """Temps: a float64 accumulator row per column reduction (before plan.finalize)."""
    sched = c.state["sched"]
    c.state["colacc"] = {n: plan.temp(c, "float64", c.shape[-1]) for n in c.members
                         if sched.role.get(n) == "col"}


def emit_rows(plan, c, fg):
    """The row loop, split over the threads by its outermost leading dim; each thread keeps
    its own row buffers and column/full partial sums (combined in thread order)."""
    S = tuple(c.shape)
    lead, C = S[:-1], S[-1]
    sched = c.state["sched"]
    b, sg = fg.b, fg.sg
    zero64 = sg.const(0.0, "float64")
    colacc = c.state["colacc"]
    for buf in colacc.values():
        with for_range(b, 0, C, name="z") as j:
            fg.store(zero64, Access(buf, "float64", 0, (1,)), [j])
    full = {}
    for n in c.members:
        if sched.role[n] == "full":
            full[n] = fg.alloca(F64, name="acc.full")
            b.store(zero64.v, full[n])
    partials = {n: Partial(fg.ptrs[buf], C) for n, buf in colacc.items()}
    partials.update((n, Partial(slot, 1)) for n, slot in full.items())

    def body(g, lo, hi, tid):
        _emit_row_range(plan, c, g, lo, hi, partials)
    parallel_range(fg, lead[0], body, work_per_iter=math.prod(lead[1:]) * C * cost(c.members),
                   partials=list(partials.values()))
    nrows = math.prod(lead)
    for n, buf in colacc.items():
        v = n.outputs[0]
        with for_range(b, 0, C, name="col") as j:
            t = _total(sg, n, fg.load(Access(buf, "float64", 0, (1,)), [j]), nrows)
            fg.store(t, Access(plan.buffers[v], v.type.dtype, 0, (1,)), [j])
    for n, slot in full.items():
        v = n.outputs[0]
        t = _total(sg, n, Scalar(b.load(slot), "float64"), nrows * C)
        fg.store(t, Access(plan.buffers[v], v.type.dtype, 0, ()), [])


def _emit_row_range(plan, c, g, lo, hi, partials):
    """Rows lo..hi of the outermost leading dim (all of the inner ones) in g."""
    S = tuple(c.shape)
    lead, C = S[:-1], S[-1]
    sched = c.state["sched"]
    b, sg = g.b, g.sg
    zero64 = sg.const(0.0, "float64")
    dense = contiguous_strides(S)
    accs = {v: plan.access(v, S) for v in c.leaves}
    for v in sched.buffered:            # a row of C elements on this thread's stack (L1)
        key = ("rowbuf", id(v))
        g.ptrs[key] = g.alloca(mem_type(v.type.dtype), name="row", count=C)
        accs[v] = Access(key, v.type.dtype, 0, (0,) * len(lead) + (1,))
    stores = set(c.results)
    by_stage = [[n for n in c.members if sched.role[n] == "S" and sched.stage[n] == k]
                for k in range(sched.nstages)]
    reds = [[n for n in c.members if sched.role[n] in ("row", "col", "full")
             and sched.stage[n] == k] for k in range(sched.nstages)]
    rownodes = [n for n in c.members if sched.role[n] == "rownode"]
    row_slots = {n: g.alloca(F64, name="acc.row") for n in c.members if sched.role[n] == "row"}
    local = {n: g.alloca(F64, name="sum.full") for n in c.members if sched.role[n] == "full"}
    for slot in local.values():
        b.store(zero64.v, slot)
    with ExitStack() as loops:
        lidx = [loops.enter_context(for_range(b, lo, hi, name="r0"))]
        lidx += [loops.enter_context(for_range(b, 0, n, name=f"r{k + 1}"))
                 for k, n in enumerate(lead[1:])]
        at0 = lidx + [ir.Constant(ir.IntType(64), 0)]
        row = {}
        for k in range(sched.nstages + 1):
            for n in rownodes:          # per-row values known from stage k
                v = n.outputs[0]
                if sched.ready[v] == k:
                    e = Expr(g, [n], accs, at0)
                    e.memo.update(row)
                    row[v] = e.value(v)
                    if v in stores:
                        g.store(row[v], _row_access(plan, v, S), at0)
            if k == sched.nstages:
                break
            for n in reds[k]:
                if n in row_slots:
                    b.store(zero64.v, row_slots[n])
            with for_range(b, 0, C, name=f"c{k}") as j:
                idx = lidx + [j]
                e = Expr(g, by_stage[k], accs, idx)
                e.memo.update(row)
                for n in by_stage[k]:
                    v = n.outputs[0]
                    if v in stores:
                        g.store(e.value(v), Access(plan.buffers[v], v.type.dtype, 0, dense),
                                idx)
                    if any(v is y for y in sched.buffered):
                        g.store(e.value(v), accs[v], idx)
                for n in reds[k]:
                    x = sg.cast(e.value(n.inputs[0]), "float64")
                    if n in row_slots:
                        _accumulate(b, row_slots[n], x)
                    elif n in local:
                        _accumulate(b, local[n], x)
                    else:               # this thread's column partial sums
                        a = Access(partials[n], "float64", 0, (1,))
                        g.store(Scalar(b.fadd(g.load(a, [j]).v, x.v), "float64"), a, [j])
            for n in reds[k]:           # the row's totals
                if n in row_slots:
                    v = n.outputs[0]
                    row[v] = _total(sg, n, Scalar(b.load(row_slots[n]), "float64"), C)
                    if v in stores:
                        g.store(row[v], _row_access(plan, v, S), at0)
    for n, slot in local.items():       # added to the partial once, after the rows
        dst = g.ptrs[partials[n]]
        b.store(b.fadd(b.load(dst, typ=F64), b.load(slot)), dst)


def _accumulate(b, slot, x):
    b.store(b.fadd(b.load(slot), x.v, flags=("reassoc",)), slot)


def _total(sg, node, acc, count):
    if node.op == "mean":
        acc = Scalar(sg.b.fdiv(acc.v, sg.const(float(count), "float64").v), "float64")
    return sg.cast(acc, node.outputs[0].type.dtype)


def _row_access(plan, v, S):
    """A per-row value's buffer addressed by the (row..., column) indices of S."""
    t = v.type
    strides = contiguous_strides(t.shape)
    lead = len(S) - 1
    if len(t.shape) == len(S):          # keepdim: (*lead, 1)
        st = tuple(strides[:lead]) + (0,)
    else:                               # (*lead,)
        st = tuple(strides) + (0,)
    return Access(plan.buffers[v], t.dtype, 0, st)

