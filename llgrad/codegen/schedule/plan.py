"""Planning a graph for native code: fusion groups, buffers, their lifetimes and the arena.

Every value lives in the buffer of its *root*: a graph input, a constant, or the result of
a node that is not a view. A view costs nothing: it is its root's buffer read through the
view's own strides and offset (from its TensorType; offsets are relative to the root's).

Fusion: an elementwise node is inlined into its consumer (computed inside the consumer's
loop, never stored) when its result has exactly one consuming node, that consumer is
elementwise or a reduction, it reads the result directly (not through a view), with the
same shape (no broadcast: inlining under a broadcast would recompute it), and the result
is not returned. Every other non-view node roots a group: one loop nest (or call) that
writes the root's buffer (one buffer per result for a kernel with several: max_dim's
values and indices, a random op's draws and new state).

Buffers, in the order of the entry's pointer array: graph inputs, then output buffers
(roots of returned values, allocated by the caller per call), then scratch (intermediate
roots and per-group temporaries), placed in one arena with reuse between buffers whose
lifetimes (first to last group that touches them) do not overlap. A cat's operand may live
in its block of the cat's result instead (a "slice" buffer: concat.py), the copy dropped."""
from collections import defaultdict

from ...ir.graph import StackType, Value
from ...ir.optable import OPS
from ...ir.geometry import contiguous_strides
from ..lowerings.loops import Access
from ..lowerings.parallel import cost
from .arena import place
from .buffer import Buffer
from ..lowerings.table import form_of

MAX_LOOP_COST = 256            # a loop body's budget of OpDef.cost units (see _fusion)
_END = object()


class Group:
    def __init__(self, index, root):
        self.index = index
        self.root = root            # the Node whose result this group writes
        self.members = []           # fused nodes (elementwise/reduce groups), topological
        self.leaves = []            # materialised Values the group reads
        self.temps = []             # Buffers private to this group
        self.state = {}             # what prepare() decided, for emit()
        # the Values this group writes to buffers (a cluster: those needed outside it)
        self.results = list(root.outputs) if root is not None else []

    @property
    def loop(self):
        """The loop structure of its code: the form of its root's lowering (elementwise,
        reduce, kernel); a fused group is "rows" or "cluster" (merge.py)."""
        return form_of(self.root)

    def __repr__(self):
        return f"<group {self.index} {self.root.op} +{len(self.members) - 1} fused>"


def escaping_values(graph):
    """Values the caller gets: outputs, mutated inputs' final values, guarded values."""
    return list(graph.outputs) + [graph.mutated[i] for i in sorted(graph.mutated)] \
        + [g.value for g in graph.guards]


def live_nodes(graph):
    """The nodes that escaping values depend on, in graph order (the rest is dead code)."""
    live, stack = set(), escaping_values(graph)
    while stack:
        n = stack.pop().node
        if n is not None and n not in live:
            live.add(n)
            stack.extend(x for x in n.inputs if isinstance(x, Value))
    return [n for n in graph.nodes if n in live]


def root_of(v):
    node = v.node
    while node is not None:
        op = OPS.get(node.op)
        if op is None or op.kind != "view":
            break
        v = node.view_of
        node = v.node
    return v


class Plan:
    def __init__(self, graph, merges=(), stage_writes=False, staged_through=None):
        """merges: functions plan -> groups applied in turn to the groups fusion made
        (elementwise code into kernels, row fusion, multi-output loops: build.py passes
        them)."""
        self.graph = graph
        # inputs' final values computed in their own buffers only where no check (a value
        # guard, an index check) can still fail after the write: a call that raises or
        # misses a guard leaves its inputs as they were. Value guards are read after the
        # call (stage_writes: every write staged); an index check returns from the kernel
        # before any later group runs, so plan_graph stages only the writes of the groups
        # up to the last one that checks (staged_through, a group index)
        self.stage_writes = stage_writes or bool(graph.guards)
        self.staged_through = staged_through
        self.escaping = escaping_values(graph)
        self.nodes = live_nodes(graph)
        self.consumers = defaultdict(list)
        for node in self.nodes:
            seen = set()
            for x in node.inputs:
                if isinstance(x, Value) and id(x) not in seen:
                    seen.add(id(x))
                    self.consumers[x].append(node)
        self.inlined = self._fusion()
        self.groups = self._groups()
        for merge in merges:
            self.groups = merge(self)
        self.buffers = {}           # root Value -> Buffer
        self.flags = []             # (Buffer, message): error words checked after a call
        self.concats = getattr(self, "concats", [])     # (set by concat.merge_concats)
        self._make_buffers()

    # ---- fusion ---------------------------------------------------------------------
    @staticmethod
    def iter_shape(node):
        """The shape a node's loop runs over (what an inlined producer must have)."""
        if form_of(node) == "reduce":
            return node.inputs[0].type.shape
        return node.outputs[0].type.shape

    def _fusion(self):
        """The elementwise nodes inlined into their one consumer's loop. A loop body stops
        growing at MAX_LOOP_COST (its nodes' OpDef.cost): LLVM's time on one basic block
        grows faster than its size, and past a few hundred ops a stored intermediate costs
        far less than the block's compile time (a chain of 1,000 fused ops compiled in
        ~20 s; cut at the budget, in linear time)."""
        escaping = set(self.escaping)
        inlined = set()
        size = defaultdict(int)         # node -> cost of its loop body so far
        for node in self.nodes:
            own = size[node] + cost((node,))
            if form_of(node) != "elementwise":
                continue
            out = node.outputs[0]
            cons = self.consumers[out]
            if out in escaping or len(cons) != 1:
                continue
            c = cons[0]
            if form_of(c) not in ("elementwise", "reduce"):
                continue
            if form_of(c) == "reduce" and c.inputs[0] is not out:
                continue
            if out.type.shape != self.iter_shape(c):
                continue
            if size[c] + own + cost((c,)) > MAX_LOOP_COST:
                continue
            size[c] += own
            inlined.add(node)
        return inlined

    def _groups(self):
        groups = []
        order = {n: i for i, n in enumerate(self.nodes)}
        for node in self.nodes:
            k = form_of(node)
            if k in ("view", "constant") or node in self.inlined:
                continue
            g = Group(len(groups), node)
            if k in ("elementwise", "reduce"):
                members, leaves = set(), []
                self._collect(node, members, leaves)
                g.members = sorted(members, key=order.__getitem__)
                g.leaves = leaves
            else:
                g.members = [node]
                g.leaves = _unique(x for x in node.inputs if isinstance(x, Value))
            groups.append(g)
        return groups

    def _collect(self, root, members, leaves):
        """Root's inlined producers (members) and the values they read (leaves), in the
        order a depth-first walk meets them; iterative, so a long fused chain cannot reach
        Python's recursion limit."""
        members.add(root)
        stack, seen = [iter(root.inputs)], set()     # (seen: the leaves' ids)
        while stack:
            x = next(stack[-1], _END)
            if x is _END:
                stack.pop()
            elif not isinstance(x, Value):
                continue
            elif x.node is not None and x.node in self.inlined:
                if x.node not in members:
                    members.add(x.node)
                    stack.append(iter(x.node.inputs))
            elif id(x) not in seen:
                seen.add(id(x))
                leaves.append(x)

    # ---- buffers ------------------------------------------------------------------------
    def _make_buffers(self):
        g = self.graph
        self.lengths = {}           # stack input -> the word the Kernel writes its length to
        for i, v in enumerate(g.inputs):
            if isinstance(v.type, StackType):       # (n, *entry) entries, n known per call
                self.buffers[v] = Buffer("input", v.type.dtype, 0, v, i)
                self.lengths[v] = Buffer("scratch", "int64", 1)
                self.lengths[v].first, self.lengths[v].last = 0, len(self.groups)
                continue
            self.buffers[v] = Buffer("input", v.type.dtype, v.type.numel, v, i)
        for node in self.nodes:
            if form_of(node) == "constant":
                v = node.outputs[0]
                self.buffers[v] = Buffer("constant", v.type.dtype, v.type.numel, v)
        out_roots = {root_of(v) for v in self.escaping}
        self.in_place = in_place_results(self)
        for grp in self.groups:
            for v in grp.results:               # a multi-result kernel: a buffer per result
                if isinstance(v.type, StackType):   # a loop's saved iterations: stacks.py
                    self.buffers[v] = Buffer("stack", "int64", 3, v)
                    continue
                if v in self.in_place:          # computed in its input's own buffer
                    self.buffers[v] = self.buffers[self.in_place[v]]
                    continue
                kind = "output" if v in out_roots else "scratch"
                self.buffers[v] = Buffer(kind, v.type.dtype, v.type.numel, v)
        for out, blocks in reversed(self.concats):  # operands written into their blocks
            parent = self.buffers.get(out)          # (a slice of a later cat's result)
            if parent is None:
                kind = "output" if out in out_roots else "scratch"
                parent = self.buffers[out] = Buffer(kind, out.type.dtype, out.type.numel, out)
            for x, base, strides in blocks:
                b = self.buffers[x] = Buffer("slice", x.type.dtype, x.type.numel, x)
                b.parent, b.base, b.strides = parent, base, strides
        for grp in self.groups:
            for v in grp.results:
                if v not in self.in_place:
                    self.buffers[v].first = grp.index
            for leaf in grp.leaves:
                b = self.buffers[root_of(leaf)]
                b.last = grp.index if b.last is None else max(b.last, grp.index)
        for b in list(self.buffers.values()):
            if b.role == "stack":               # the Kernel reads it after the call
                b.last = len(self.groups)
            p, last = b.parent, b.first if b.last is None else b.last
            while p is not None:                # a slice's parents live while it does
                if b.first is not None:
                    p.first = b.first if p.first is None else min(p.first, b.first)
                if last is not None:
                    p.last = last if p.last is None else max(p.last, last)
                p = p.parent

    def __getstate__(self):
        # (a plan kept on disk, codegen/prepared.py: call_specs' record is keyed by id() of
        # this process's buffers, so it is made again where the plan is loaded)
        state = dict(self.__dict__)
        state.pop("_call_specs", None)
        return state

    def temp(self, group, dtype, numel):
        """A scratch buffer private to group (call from a lowering's prepare)."""
        b = Buffer("temp", dtype, numel)
        b.first = b.last = group.index
        group.temps.append(b)
        return b

    def flag(self, group, message):
        """A one-word int64 error flag for group (see ops_index): a temp that no other buffer
        shares (live to the end of the call), read by Kernel after the native call."""
        b = self.temp(group, "int64", 1)
        b.last = len(self.groups)
        self.flags.append((b, message))
        return b

    def finalize(self):
        """Assign pointer-array slots and arena offsets (after every prepare)."""
        ins = [self.buffers[v] for v in self.graph.inputs]
        outs = [b for b in self.buffers.values() if b.role == "output"]
        scratch = [b for b in self.buffers.values() if b.role in ("scratch", "stack")]
        self.stacks = [b for b in scratch if b.role == "stack"]
        scratch += [t for grp in self.groups for t in grp.temps] + list(self.lengths.values())
        for b in scratch:
            if b.last is None:
                b.last = b.first
        for slot, b in enumerate(ins + outs + scratch):
            b.slot = slot
        slices = [b for b in self.buffers.values() if b.role == "slice"]
        for k, b in sorted(enumerate(slices), key=lambda kb: _depth(kb[1])):
            b.slot = f"{b.parent.slot}x{k}"     # (a name only: the entry offsets the parent's)
        self.inputs, self.outputs, self.scratch = ins, outs, scratch
        self.nslots = len(ins) + len(outs) + len(scratch)
        self.arena_bytes = place(scratch)

    # ---- accesses ------------------------------------------------------------------------
    def access(self, v, shape):
        """How to read value v broadcast to shape (NumPy's right-aligned broadcasting)."""
        root = root_of(v)
        t = v.type
        if self.buffers[root].strides is not None:  # (only a dropped cat read these)
            raise AssertionError(f"plan: %{v.name} is read from a strided slice")
        lead = len(shape) - len(t.shape)
        strides = [0] * lead + [0 if n == 1 else s for n, s in zip(t.shape, t.strides)]
        return Access(self.buffers[root], t.dtype, t.offset - root.type.offset, tuple(strides))

    def out_access(self, group):
        v = group.root.outputs[0]
        return Access(self.buffers[v], v.type.dtype, 0, self.store_strides(v))

    def store_strides(self, v):
        """v's strides in its buffer: a slice's (schedule/concat.py), else dense."""
        st = self.buffers[v].strides
        return tuple(st) if st is not None else contiguous_strides(v.type.shape)

    def group_buffers(self, group):
        """The distinct buffers a group touches (its function's parameters), in order."""
        bufs = [self.buffers[v] for v in group.results]
        bufs += [self.buffers[root_of(v)] for v in group.leaves]
        bufs += [self.lengths[root_of(v)] for v in group.leaves if root_of(v) in self.lengths]
        bufs += group.temps
        return _unique(bufs)

    def describe(self):
        lines = []
        for grp in self.groups:
            names = " ".join(n.op for n in grp.members)
            outs = ", ".join(str(self.buffers[v]) for v in grp.results)
            lines.append(f"group {grp.index}: [{names}] -> {outs}")
        for b in self.scratch:
            lines.append(f"  scratch slot {b.slot}: {b.dtype}[{b.numel}] @{b.offset} "
                         f"groups {b.first}..{b.last}")
        return "\n".join(lines)


def in_place_results(plan):
    """{group result: graph input} for the mutated inputs whose final value can be written
    straight into the input's own buffer, so that the call neither allocates an output for
    it nor copies it back (an optimiser's step: parameters and moments updated in place).

    Safe where nothing reads the input's old value after the write: every group that reads
    it comes before the one that computes the final value, or is that group itself, a loop
    over the input's own shape (elementwise, or a cluster of such loops) that reads it
    directly at the index it writes (a cluster loads every value of an element before it
    stores any: cluster.py). The old value must not escape either (returned, guarded), nor
    the final value be returned besides (its array would be the input's). The input is
    dense (C-contiguous from offset 0, as the output buffer would be) with the final
    value's dtype and shape; the launch checks every input's layout. None where the plan
    stages its writes (Plan.stage_writes), and not for a final value computed in or before
    the group Plan.staged_through."""
    g = plan.graph
    if plan.stage_writes:
        return {}
    position = {}
    for k, grp in enumerate(plan.groups):
        for v in grp.results:
            position[v] = k
    readers = {}                   # graph input -> [(group position, value it reads)]
    for k, grp in enumerate(plan.groups):
        for leaf in grp.leaves:
            readers.setdefault(root_of(leaf), []).append((k, leaf))
    returned = set(g.outputs) | {gd.value for gd in g.guards}
    escaping_roots = {root_of(v) for v in plan.escaping}    # (another input's final too)
    chosen = {}
    for i in sorted(g.mutated):
        inp, final = g.inputs[i], g.mutated[i]
        t, ft = inp.type, final.type
        if isinstance(t, StackType) or final not in position or final in chosen \
                or final in returned or inp in escaping_roots:
            continue
        if ft.dtype != t.dtype or tuple(ft.shape) != tuple(t.shape) or t.offset \
                or tuple(t.strides) != tuple(contiguous_strides(t.shape)):
            continue
        k = position[final]
        if plan.groups[k].loop not in ("elementwise", "cluster") or (
                plan.staged_through is not None and plan.groups[k].index <= plan.staged_through):
            continue
        if all(j < k or (j == k and leaf is inp) for j, leaf in readers.get(inp, ())):
            chosen[final] = inp
    return chosen


def _depth(b):
    return 0 if b.parent is None else 1 + _depth(b.parent)


def _unique(xs):
    """xs without repeats (by identity), in order: a cat of a loop's 1,000 steps reads 1,000
    values (a scan of those kept so far for each was quadratic)."""
    return list({id(x): x for x in xs}.values())


