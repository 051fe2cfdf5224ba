"""Split a joint forward+backward graph into a forward graph (outputs + saved values) and a
backward graph (saved values + output cotangents -> input gradients).

Which values cross is a minimum cut (as AOTAutograd chooses): every value the backward
reads must be either saved or recomputed in the backward from saved values through cheap
ops (views, elementwise, creation, reductions); matmuls and random draws are never
recomputed, nor ops whose table entry says recompute=False (exact GELU: its VJP evaluates erf
itself, so a recomputed result is a second erf pass in the backward). Saving a value costs its
bytes; primal inputs cost nothing (the caller holds them). The cut of least total bytes
decides what is saved and what is recomputed. Backward nodes that repeat a forward
composite's own dear computation (exact GELU's VJP evaluates GELU's erf again) are first
moved into the forward and pinned there, so the forward's lowering computes them once
(ir/forward_shared.py).

Control-flow nodes (cond, while_loop) are never recomputed: the backward reads what they
give (a loop's trip count and stacks, a branch's results) as saved values. A stack's cost is
one iteration's bytes (its length is known only at run time)."""
import collections

from .forward_shared import expand_shared, shared_with_forward
from .graph import Graph, Guard, Node, Value
from .optable import OPS
from .saved_stacks import out_types, through_stacks, view_nodes

RECOMPUTABLE_KINDS = ("view", "elementwise", "creation", "reduce")


class SavedValue:
    """One row of the saved table: what the backward reads and where it comes from."""
    __slots__ = ("name", "type", "loc", "input_index")

    def __init__(self, name, type, loc, input_index=None):
        self.name, self.type, self.loc = name, type, loc
        self.input_index = input_index  # a primal input (the caller can reach it), else None

    def __eq__(self, other):
        return type(other) is SavedValue and (self.name, self.type, self.loc, self.input_index) \
            == (other.name, other.type, other.loc, other.input_index)

    __hash__ = None

    def __repr__(self):
        return (f"SavedValue(name={self.name!r}, type={self.type!r}, loc={self.loc!r}, "
                f"input_index={self.input_index!r})")

    @property
    def nbytes(self):
        return self.type.nbytes


def _ancestors(values, stop=()):
    """Nodes needed to compute values, in no particular order (iterative)."""
    seen, stack = set(), [v.node for v in values if v.node is not None]
    while stack:
        n = stack.pop()
        if n in seen or n in stop:
            continue
        seen.add(n)
        stack.extend(x.node for x in n.inputs if isinstance(x, Value) and x.node is not None)
    return seen


def _recomputable(node):
    if node.op == "constant":
        return True
    op = OPS.get(node.op)
    return op is not None and op.kind in RECOMPUTABLE_KINDS and op.recompute


def min_cut(required, fwd_nodes, primal, free, pinned=()):
    """-> (values to save, forward nodes to recompute in the backward). A flow network:
    each forward value v is an edge v_in -> v_out of capacity bytes(v); operands feed
    their results with infinite capacity; the source feeds inputs and values only the
    forward can make (and those of `pinned` nodes); values the backward reads drain into
    the sink."""
    values = list(primal) + [o for n in fwd_nodes for o in n.outputs]     # (primal: ordered)
    primal = set(primal)
    index = {v: i for i, v in enumerate(values)}
    src, sink = -1, -2
    # bytes first; among cuts of equal bytes, prefer later values (less to recompute)
    scale = len(values) + 1
    inf = 1 + scale * (1 + sum(v.type.nbytes for v in values))
    cap = collections.defaultdict(dict)

    def edge(a, b, c):
        cap[a][b] = cap[a].get(b, 0) + c
        cap[b].setdefault(a, 0)

    for v, i in index.items():
        edge(2 * i, 2 * i + 1, 0 if v in free else v.type.nbytes * scale + scale - 1 - i)
        if v in primal or not _recomputable(v.node) or v.node in pinned:
            edge(src, 2 * i, inf)
    for n in fwd_nodes:
        operands = [x for x in n.inputs if isinstance(x, Value)] + \
            ([n.view_of] if n.view_of is not None else [])
        for o in n.outputs:
            for x in operands:
                if x in index:
                    edge(2 * index[x] + 1, 2 * index[o], inf)
    for v in required:
        edge(2 * index[v] + 1, sink, inf)
    _max_flow(cap, src, sink)
    reach = _reachable(cap, src)
    cut = {v for v, i in index.items() if 2 * i in reach and 2 * i + 1 not in reach}
    on_sink_side = {n for n in fwd_nodes if any(2 * index[o] not in reach for o in n.outputs)}
    needed = _ancestors(required, stop=set(fwd_nodes) - on_sink_side)
    recompute = {n for n in on_sink_side if n in needed}
    read = set(required)
    for n in recompute:
        read.update(x for x in n.inputs if isinstance(x, Value))
        if n.view_of is not None:
            read.add(n.view_of)
    return [v for v in values if v in cut and v in read], recompute


def _reachable(cap, src):
    seen, stack = {src}, [src]
    while stack:
        a = stack.pop()
        for b, c in cap[a].items():
            if c > 0 and b not in seen:
                seen.add(b)
                stack.append(b)
    return seen


def _max_flow(cap, src, sink):
    """Dinic: a breadth-first pass levels the residual graph, then depth-first walks along
    rising levels push every path it holds, until the sink is out of reach. The cut read off
    afterwards (_reachable) is the same for every maximum flow; Edmonds-Karp's one path per
    pass made a stack of 12 transformer blocks' partition quadratic (0.3 s)."""
    while True:
        level = {src: 0}
        queue = collections.deque([src])
        while queue:
            a = queue.popleft()
            for b, c in cap[a].items():
                if c > 0 and b not in level:
                    level[b] = level[a] + 1
                    queue.append(b)
        if sink not in level:
            return
        edges = {a: list(cap[a]) for a in level}    # each node's untried edges, in order
        while _push_path(cap, level, edges, src, sink):
            pass


def _push_path(cap, level, edges, src, sink):
    """One path from src to sink along rising levels, its bottleneck pushed; False when the
    level graph holds none (edges that lead nowhere are dropped as the walk backs off)."""
    path = [src]
    while path:
        a = path[-1]
        if a == sink:
            push = min(cap[x][y] for x, y in zip(path, path[1:]))
            for x, y in zip(path, path[1:]):
                cap[x][y] -= push
                cap[y][x] += push
            return True
        todo = edges[a]
        while todo and not (cap[a][todo[-1]] > 0 and level.get(todo[-1]) == level[a] + 1):
            todo.pop()
        if todo:
            path.append(todo[-1])
        else:
            path.pop()
            if path:
                edges[path[-1]].pop()               # (a leads nowhere now)
    return False


def partition(joint, n_primal, n_out, n_mut, n_guard, guards=(), mutated_inputs=(),
              kept_inputs=None):
    """joint.outputs = forward outputs (n_out), mutated-input values (n_mut), guard values
    (n_guard), then input gradients. Returns (forward, backward, saved table).

    kept_inputs: positions of the inputs the backward may read where they are (eager saved
    them: their versions are checked); any other input it needs costs its bytes like a
    forward value (the caller may write it in place after the call). None: every input."""
    k = n_out + n_mut + n_guard
    fwd = _ancestors(joint.outputs[:k])
    joint = expand_shared(joint, fwd, _ancestors(joint.outputs[k:], stop=fwd))
    fwd_targets, grads = joint.outputs[:k], joint.outputs[k:]
    # (a list: min_cut numbers values in this order, and set order follows addresses,
    # which would give the backward's inputs, so its cache key, a new order every process)
    primal = list(joint.inputs[:n_primal])
    # an input the forward modifies is not free to keep: its old value must be saved
    kept = primal if kept_inputs is None else [primal[i] for i in kept_inputs]
    free = set(kept) - {joint.inputs[i] for i in mutated_inputs}
    cotangents = joint.inputs[n_primal:]
    fwd = _ancestors(fwd_targets)
    bwd = _ancestors(grads, stop=fwd)
    moved, pinned = shared_with_forward(joint, fwd, bwd)
    if moved:
        fwd |= moved
        bwd = _ancestors(grads, stop=fwd)
    defined_fwd = set(primal)
    for n in fwd:
        defined_fwd.update(n.outputs)
    used_by_bwd = []
    for n in joint.nodes:
        if n in bwd:
            used_by_bwd += [x for x in n.inputs if isinstance(x, Value) and x in defined_fwd]
            if n.view_of is not None and n.view_of in defined_fwd:
                used_by_bwd.append(n.view_of)
    used_by_bwd += [g for g in grads if g in defined_fwd]
    saved = list(dict.fromkeys(used_by_bwd))

    saved, recompute = min_cut(saved, [n for n in joint.nodes if n in fwd], primal, free,
                               pinned)
    bwd |= recompute
    saved, via_stack = through_stacks(saved, [n for n in joint.nodes if n in fwd], free)
    order = {n: i for i, n in enumerate(joint.nodes)}
    primal_at = {v: i for i, v in enumerate(primal)}
    # free inputs first, then other inputs (both by position), then forward values
    saved.sort(key=lambda v: (0 if v in free else 1, primal_at[v]) if v in primal_at
               else (2, order[v.node]))
    fwd_nodes = [n for n in joint.nodes if n in fwd]
    bwd_nodes = [n for n in joint.nodes if n in bwd]

    forward = Graph(joint.name.replace("_joint", "") + "_forward", list(joint.inputs[:n_primal]),
                    fwd_nodes, list(fwd_targets[:n_out]) + [v for v in saved if v not in free])
    for i, v in zip(mutated_inputs, fwd_targets[n_out:n_out + n_mut]):
        forward.mutated[i] = v
    forward.guards = [Guard(v, g.expected, g.loc)
                      for v, g in zip(fwd_targets[n_out + n_mut:k], guards)]

    table, subst, bwd_inputs = [], {}, []
    for j, v in enumerate(saved):
        idx = joint.inputs.index(v) if v in free else None
        name = v.name if v in free else f"s{j}"
        nv = Value(v.type, None, len(bwd_inputs), name)
        subst[v] = nv
        bwd_inputs.append(nv)
        where = "input" if idx is not None else \
            "input (copied)" if v.node is None else (v.node.loc or "?")
        table.append(SavedValue(name, v.type, where, idx))
    for ct in cotangents:
        nv = Value(ct.type, None, len(bwd_inputs), ct.name)
        subst[ct] = nv
        bwd_inputs.append(nv)
    nodes = view_nodes(via_stack, subst, lambda v: v.node.loc)
    for n in bwd_nodes:
        m = Node(n.op, [subst.get(x, x) if isinstance(x, Value) else x for x in n.inputs],
                 dict(n.attrs), [], n.loc, subst.get(n.view_of) if n.view_of is not None
                 else None)
        m.outputs = [Value(t, m, o.index) for t, o in zip(out_types(n, m, via_stack), n.outputs)]
        subst.update(zip(n.outputs, m.outputs))
        nodes.append(m)
    backward = Graph(forward.name.replace("_forward", "_backward"), bwd_inputs, nodes,
                     [subst[g] for g in grads])
    return forward, backward, table
