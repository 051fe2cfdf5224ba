"""Multi-output loop fusion: elementwise groups (and full sum/mean reductions) that run over
the same iteration space become one loop nest, a *cluster*.

Chain fusion (plan.py) inlines a value into its only consumer. A value with several
consumers - a forward activation that the loss and three gradients all read - roots a
group of its own and goes through memory: stored once, loaded by each consumer's loop. In
a cluster such a value is computed once per element and stays in a register; it is stored
only when something outside the cluster (or the caller) needs it. A full sum or mean in
the cluster accumulates in float64 in the same loop, so `loss = sum(f(x)); grads = g(x)`
reads its inputs once and writes only what is returned.

Which groups join: greedily, in group order, a group joins an open cluster of its
iteration shape when (1) it is elementwise, or a full float sum/mean; (2) every value it
reads from the cluster is an elementwise root of the same shape read directly (no view or
broadcast: that element is the one in the register); (3) it reads nothing that depends on
the cluster from outside it; (4) it shares data with the cluster: reads a value the cluster
computes or a buffer the cluster reads. A group that shares nothing with any open cluster of
its shape starts one of its own. Without (4) independent work of one shape from all over
the graph - the same layer's gradients in each of twelve blocks - became one loop whose
code differs with the depth, so no two blocks' clusters could share a function (dedupe.py)
and compile time grew with the depth; sharing nothing, such groups gain nothing from one
loop but fewer calls. A group that depends on a cluster without joining it seals
that cluster (the cluster runs where its last member was; whatever depends on it must come
after). Groups in between that do not depend on the cluster run before it, so moving the
members together keeps every value computed before it is read."""
import math

from ...ir.geometry import contiguous_strides
from ..lowerings.fusion import Expr
from ..lowerings.loops import Access, float32_sum_hints, normalize
from .merge import FusedGroup, fused_in_order, join_groups, place_fused
from .plan import MAX_LOOP_COST, root_of
from ..lowerings.ops_reduce import reduced_dims
from ..lowerings.parallel import MIN_WORK_PER_THREAD, Partial, cost, parallel_loops
from ..lowerings.scalar import F64, Scalar

_REDUCTIONS = ("sum", "mean")


_OPEN_SEARCHED = 8      # open clusters of a shape a group looks through (the latest ones)


class Cluster(FusedGroup):
    LOOP = "cluster"

    def __init__(self, shape):
        super().__init__(shape)
        self.reductions = []        # reduce root nodes (accumulated in the loop)
        self.touched = set()        # ids of the buffers' roots its members read or compute

    def __getstate__(self):       # (ids of this process's values: planning's, done)
        return dict(self.__dict__, touched=set())

    def add(self, grp):
        super().add(grp)
        if grp.loop == "reduce":
            self.reductions.append(grp.root)
        self.touched.update(id(root_of(v)) for v in grp.leaves)
        self.touched.update(id(v) for n in grp.members for v in n.outputs)


def _shares(c, grp):
    return any(id(root_of(v)) in c.touched for v in grp.leaves)


def _loop_shape(grp):
    """The iteration shape of a group that may join a cluster, else None."""
    node = grp.root
    if grp.loop == "elementwise":
        return tuple(node.outputs[0].type.shape)
    if grp.loop == "reduce" and node.op in _REDUCTIONS:
        x = node.inputs[0]
        if reduced_dims(node) == set(range(len(x.type.shape))) and node.attrs.get("dtype") is None and \
                node.outputs[0].type.dtype in ("float32", "float64"):
            return tuple(x.type.shape)
    return None


def merge_loops(plan):
    """plan.groups with clusters of two or more groups (or one big total) in place of
    their members."""
    open_by_shape = {}

    def pick(grp, m):
        shape = _loop_shape(grp)
        if shape is None or not shape or not all(n > 0 for n in shape):
            return None
        clusters = open_by_shape.setdefault(shape, [])
        clusters[:] = [c for c in clusters if not c.sealed and not c.full_for(grp)]
        joined = _join_read_clusters(clusters, grp, m)
        if joined is not None:
            return joined
        for c in reversed(clusters[-_OPEN_SEARCHED:]):
            if _shares(c, grp) and _can_join(c, grp, m):
                return c
        clusters.append(Cluster(shape))
        return clusters[-1]

    cluster_of = join_groups(plan, pick)
    keep = [c for c in fused_in_order(cluster_of) if len(c.parts) >= 2 or _big_total(c)]
    for c in keep:
        _finish(plan, c)
    return place_fused(plan, cluster_of, keep)


def _join_read_clusters(clusters, grp, m):
    """The one cluster made of the open clusters grp reads values from, when there are
    several (an LSTM backward step: sigmoid(o) in one, tanh(c) in another, the cell
    gradient reading both), else None. Joining only the latest would seal the others, and
    each would run as a loop of its own that stores what the others load. Merging is
    safe: an unsealed cluster has no reader outside it yet, so all of them can run where
    the last member of any of them was."""
    read = [c for c in clusters if m.inside_reads(c, grp)]
    if len(read) < 2 or not all(_can_join(c, grp, m) for c in read) or \
            sum(c.cost for c in read) + cost(grp.members) > MAX_LOOP_COST:
        return None
    into = read[0]
    for other in read[1:]:
        for part in other.parts:
            into.add(part)
            m.cluster_of[part] = into
        clusters.remove(other)
    into.parts.sort(key=lambda part: part.index)
    into.root = into.parts[-1].root
    return into


def _can_join(c, grp, m):
    reads = m.inside_reads(c, grp)
    # an elementwise member's own value (not a reduction's result, nor a view of a value)
    return all(p.loop == "elementwise" and leaf is p.root.outputs[0] for leaf, p in reads)


def _big_total(c):
    """A lone full sum/mean big enough for threads: as a cluster it runs on all of them
    (ops_reduce's loops are serial)."""
    return len(c.parts) == 1 and c.parts[0].loop == "reduce" and \
        math.prod(c.shape) * cost(c.parts[0].members) >= 2 * MIN_WORK_PER_THREAD


def _finish(plan, c):
    members = [n for grp in c.parts for n in grp.members]
    c.members = members
    inside = set(members)
    computed = {grp.root.outputs[0] for grp in c.parts if grp.loop == "elementwise"}
    escaping = set(plan.escaping)
    c.results = [grp.root.outputs[0] for grp in c.parts
                 if grp.loop == "reduce" or grp.root.outputs[0] in escaping or
                 any(n not in inside for n in plan.consumers[grp.root.outputs[0]])]
    c.leaves = list({id(x): x for grp in c.parts for x in grp.leaves
                     if x not in computed}.values())       # (in order, each once)


def _dtypes(c):
    return [v.type.dtype for n in c.members for v in n.outputs]


def emit_cluster(plan, c, fg):
    """One loop nest (split over the threads: parallel.py): every member once per element,
    stores of the values needed outside, float64 accumulators for the reductions (one per
    thread, added up in thread order after the join, then written)."""
    shape = c.shape
    stores = [v for v in c.results if v.node not in c.reductions]
    dense = contiguous_strides(shape)
    leaves = [(v, plan.access(v, shape)) for v in c.leaves]
    # (a store's strides are dense unless it writes a block of a cat's result: concat.py)
    own = [plan.store_strides(v) for v in stores]
    ext, strides, _, _ = normalize(shape, [dense] + own + [a.strides for _, a in leaves])
    outs = [(v, Access(plan.buffers[v], v.type.dtype, 0, st))
            for v, st in zip(stores, strides[1:])]
    accs = {v: a.with_strides(s) for (v, a), s in zip(leaves, strides[1 + len(own):])}
    sg, b = fg.sg, fg.b
    zero = sg.const(0.0, "float64").v
    totals = []
    for node in c.reductions:
        slot = fg.alloca(F64, name=f"acc.{node.op}")
        b.store(zero, slot)
        totals.append((node, slot))
    partials = [Partial(slot, 1) for _, slot in totals]     # one per thread, then summed
    values = set(c.members) - set(c.reductions)

    def body(g, loops, tid):
        # each thread sums its chunk in slots of its own (registers, once promoted) and adds
        # them to its partials once, after its loop
        local = []
        for node, _ in totals:
            local.append(g.alloca(F64, name=f"sum.{node.op}"))
            g.b.store(zero, local[-1])
        with loops() as idx:
            e = Expr(g, values, accs, idx)
            # every value of the element before any store: a result written into its input's
            # own buffer (plan.in_place_results) must not be read back as that input
            results = [e.value(v) for v, _ in outs]
            summands = [g.sg.cast(e.value(node.inputs[0]), "float64") for node, _ in totals]
            for (_, acc), x in zip(outs, results):
                g.store(x, acc, idx)
            for s, x in zip(local, summands):
                g.b.store(g.b.fadd(g.b.load(s), x.v, flags=("reassoc",)), s)
        for p, s in zip(partials, local):
            dst = g.ptrs[p]
            g.b.store(g.b.fadd(g.b.load(dst, typ=F64), g.b.load(s)), dst)
    parallel_loops(fg, ext, body, cost=cost(c.members), partials=partials,
                   hints=float32_sum_hints(fg.module, _dtypes(c), ext[-1])
                   if c.reductions and ext else None)
    count = math.prod(shape)
    for node, slot in totals:
        total = Scalar(b.load(slot), "float64")
        if node.op == "mean":
            total = Scalar(b.fdiv(total.v, sg.const(float(count), "float64").v), "float64")
        v = node.outputs[0]
        fg.store(sg.cast(total, v.type.dtype),
                 Access(plan.buffers[v], v.type.dtype, 0, ()), [])
