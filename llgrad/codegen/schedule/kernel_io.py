"""Elementwise groups fused into the kernels next to them (lowerings/kernel_io.py emits
them): an activation after a batch norm, relu's backward before batch_norm_backward.

Epilogues: an elementwise group E joins the kernel group K that computes one of its
operands when
  - K's lowering takes epilogues on that result (table.py: epilogue=) and E reads it
    directly (no view) with E's own shape, so K's store loop walks E's elements;
  - E reads nothing else of K's but its earlier epilogues' values (directly), and every
    other value it reads is computed before K (E runs where K runs, earlier than it did);
  - the fused code stays within MAX_LOOP_COST.
Of the kernels an elementwise group reads, the one that runs last is the candidate (a
residual add reads two batch norms' outputs: it joins the later one). K's result is then
written only if something outside the group reads it (or the caller does).

Prologues: the elementwise group P that computes operand j of kernel K joins K when K's
lowering takes prologues at j (table.py: prologue=), K is the only reader of P's value (it
is neither returned nor read elsewhere) and reads it directly, only at such positions. P
then runs where K runs, later than it did; the values it reads live on to K (buffer
lifetimes come from the groups as merged). Its code runs once per load of the operand
(batch_norm_backward loads its gradient in two passes), so only cheap code joins
(MAX_PROLOGUE_COST: relu's backward costs 2, leaky_relu's 3) for one pass less over memory.

Epilogues are chosen first: an elementwise group between two kernels computes once at the
first's store rather than at each of the second's loads."""
from ...ir.graph import Value
from ..lowerings.kernel_io import Fused
from ..lowerings.parallel import cost
from ..lowerings.table import LOWERINGS
from .plan import MAX_LOOP_COST, root_of

# a prologue's OpDef.cost per element at most (it runs at each of the kernel's loads: two
# transcendental ops loaded twice would cost more than the pass over memory they save)
MAX_PROLOGUE_COST = 8


def merge_kernel_io(plan):
    """plan.groups with elementwise groups fused into kernels' loads and stores."""
    groups = plan.groups
    pos = {grp: k for k, grp in enumerate(groups)}
    where = {v: grp for grp in groups for v in grp.results}     # value -> group computing it
    host = {}                   # absorbed elementwise group -> kernel group
    for grp in groups:
        if grp.loop == "elementwise":
            k = _epilogue_host(plan, grp, where, pos)
            if k is not None:
                _add_epilogue(k, grp)
                host[grp] = k
                for v in grp.results:
                    where[v] = k
    escaping = set(plan.escaping)
    for grp in groups:
        low = LOWERINGS[grp.root.op] if grp.loop == "kernel" else None
        for j in (low.prologue if low is not None else ()):
            v = grp.root.inputs[j]
            p = where.get(v)
            if p is None or p.loop != "elementwise" or p in host or p.root.outputs[0] is not v \
                    or v in escaping or plan.consumers[v] != [grp.root] \
                    or cost(p.members) > MAX_PROLOGUE_COST \
                    or any(x is v for i, x in enumerate(grp.root.inputs) if i not in low.prologue):
                continue
            _fused(grp).prologue[v] = list(p.members)
            host[p] = grp
    if not host:
        return groups
    order = {n: i for i, n in enumerate(plan.nodes)}
    for k in set(host.values()):
        _finish(plan, k, [g for g, h in host.items() if h is k], order)
    out = [grp for grp in groups if grp not in host]
    for i, grp in enumerate(out):
        grp.index = i
    return out


def _fused(k):
    return k.state.setdefault("fused", Fused())


def _epilogue_host(plan, grp, where, pos):
    """The kernel group grp can be an epilogue of, or None."""
    reads = [(leaf, where.get(root_of(leaf))) for leaf in grp.leaves]
    made = [(leaf, p) for leaf, p in reads if p is not None]
    if not made:
        return None
    k = max((p for _, p in made), key=pos.__getitem__)
    low = LOWERINGS[k.root.op] if k.loop == "kernel" else None
    if low is None or not low.epilogue:
        return None
    f = k.state.get("fused")
    own = {k.root.outputs[i] for i in low.epilogue}
    shape = tuple(grp.root.outputs[0].type.shape)
    earlier = {v for n in f.nodes() for v in n.outputs} if f is not None else set()
    for leaf, p in made:
        if p is not k:
            if pos[p] >= pos[k]:
                return None
        elif leaf not in own and leaf not in earlier or tuple(leaf.type.shape) != shape:
            return None             # (a view, another result, or a broadcast)
    if not any(leaf in own for leaf, p in made if p is k):
        return None
    used = cost(f.nodes()) if f is not None else 0
    if used + cost(grp.members) > MAX_LOOP_COST:
        return None
    return k


def _add_epilogue(k, grp):
    f = _fused(k)
    low = LOWERINGS[k.root.op]
    own = [k.root.outputs[i] for i in low.epilogue]
    earlier = {n.outputs[0]: y for y, ns in f.epilogue.items() for n in ns}
    ys = {y if y in own else earlier[y] for y in grp.leaves if y in own or y in earlier}
    y = next(iter(ys)) if len(ys) == 1 else None
    if y is None:                   # (it reads two results' epilogues: one Expr for both)
        y = own[0]
        for other in sorted(ys - {y}, key=own.index):
            f.epilogue.setdefault(y, []).extend(f.epilogue.pop(other, []))
    f.epilogue.setdefault(y, []).extend(grp.members)


def _finish(plan, k, absorbed, order):
    """k's members, leaves and results with the absorbed groups' nodes in them."""
    f = k.state["fused"]
    k.members = sorted(set(k.members) | set(f.nodes()), key=order.__getitem__)
    inside = set(k.members)
    computed = {o for n in k.members for o in n.outputs}
    escaping = set(plan.escaping)

    def read_outside(v):
        return v in escaping or any(n not in inside for n in plan.consumers[v])

    epi = {n.outputs[0] for ns in f.epilogue.values() for n in ns}
    k.results = [v for v in k.root.outputs if v not in f.epilogue or read_outside(v)]
    f.stores = [v for v in sorted(epi, key=lambda v: order[v.node]) if read_outside(v)]
    k.results += f.stores
    leaves = []
    for grp in [k] + absorbed:
        for x in grp.leaves:
            if isinstance(x, Value) and x not in computed and all(x is not y for y in leaves):
                leaves.append(x)
    k.leaves = leaves
