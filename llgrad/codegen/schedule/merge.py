"""Greedy fusion of groups into one loop nest, shared by cluster.py (elementwise groups and
full sums over one shape) and rows.py (row fusion across partial reductions).

`join_groups(plan, pick)` walks the groups in order; `pick(grp, m)` names the open fused group
grp joins, or None. A group that depends on a fused group without joining it *seals* it:
the fused group runs where its last member was, so whatever depends on it must come after
and nothing later may join. Groups in between that do not depend on it run before it, so
moving the members together keeps every value computed before it is read. `place_fused` then
puts each kept fused group where its last member was."""
from ..lowerings.parallel import cost
from .plan import MAX_LOOP_COST, Group, root_of


class FusedGroup(Group):
    """Member groups (`parts`, in their original order) fused into one loop nest over
    `shape`; `results` are the values stored for readers outside it (set when finished)."""
    LOOP = "fused"

    def __init__(self, shape):
        super().__init__(None, None)
        self.shape = shape
        self.parts = []
        self.sealed = False
        self.results = []
        self.cost = 0               # its members' OpDef.cost, against MAX_LOOP_COST

    @property
    def loop(self):
        return self.LOOP

    def add(self, grp):
        self.parts.append(grp)
        self.root = grp.root
        self.cost += cost(grp.members)

    def full_for(self, grp):
        """Whether grp would take the loop body past its budget (plan._fusion says why)."""
        return bool(self.parts) and self.cost + cost(grp.members) > MAX_LOOP_COST

    def __repr__(self):
        return f"<{self.loop} {self.index}: {len(self.parts)} groups over {self.shape}>"


class Joining:
    """The state of join_groups that pick() consults: which group writes a value and which
    fused group a group joined."""

    def __init__(self, plan):
        self.producer = {v: grp for grp in plan.groups for v in grp.results}
        self.cluster_of = {}

    def inside_reads(self, c, grp):
        """[(leaf, producing group)] for grp's reads of values of open fused group c. (A read
        of c through a group outside it cannot be: the first group outside c on such a path
        read c directly, and sealed it.)"""
        out = []
        for leaf in grp.leaves:
            p = self.producer.get(root_of(leaf))
            if p is not None and self.cluster_of.get(p) is c:
                out.append((leaf, p))
        return out


def join_groups(plan, pick):
    """{group: the fused group it joined} (fused groups have .add, .sealed)."""
    m = Joining(plan)
    for grp in plan.groups:
        # (the fused groups it reads directly: one it depends on through others was sealed
        # by the first of those, which read it directly; so no closure is kept, which grew
        # with the chain: quadratic in a deep model)
        read = {m.cluster_of[p] for p in (m.producer.get(root_of(leaf)) for leaf in grp.leaves)
                if p is not None and p in m.cluster_of}
        c = pick(grp, m)
        for other in read:
            if other is not c:
                other.sealed = True
        if c is not None:
            c.add(grp)
            m.cluster_of[grp] = c
    return m.cluster_of


def fused_in_order(cluster_of):
    """The fused groups, in the order their first member comes."""
    return list(dict.fromkeys(cluster_of.values()))


def place_fused(plan, cluster_of, keep):
    """The new group list: each fused group in keep where its last member was (the members
    of the others stay as they were), renumbered."""
    last = {}
    for grp in plan.groups:
        if grp in cluster_of:
            last[cluster_of[grp]] = grp
    out = []
    for grp in plan.groups:
        c = cluster_of.get(grp)
        if c is None or c not in keep:
            out.append(grp)
        elif last[c] is grp:
            out.append(c)
    for i, grp in enumerate(out):
        grp.index = i
    return out
