"""Split a joint forward+backward graph into a forward graph (outputs + saved values) and a
backward graph (saved values + output cotangents -> input gradients).

Which values cross is chosen to save memory: a saved value made by a cheap node (a view, a
cast, an elementwise op) is recomputed in the backward from its operands when those cost no
more bytes to keep than the value itself; primal inputs cost nothing (the caller holds
them). This greedy cut is repeated until nothing more moves."""
from dataclasses import dataclass

from .graph import Graph, Guard, Node, Value
from .optable import OPS

CHEAP_KINDS = ("view", "elementwise")
NOT_RECOMPUTED = ("rng_normal", "rng_uniform", "constant")


@dataclass
class SavedValue:
    name: str
    type: object
    loc: str
    input_index: int = None     # a primal input (the caller can reach it), else None

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


def _bytes(v, primal):
    return 0 if v in primal else v.type.nbytes


def partition(joint, n_primal, n_out, n_mut, n_guard, guards=(), mutated_inputs=()):
    """joint.outputs = forward outputs (n_out), mutated-input values (n_mut), guard values
    (n_guard), then input gradients. Returns (forward, backward, saved table)."""
    k = n_out + n_mut + n_guard
    fwd_targets, grads = joint.outputs[:k], joint.outputs[k:]
    primal = set(joint.inputs[:n_primal])
    cotangents = joint.inputs[n_primal:]
    fwd = _ancestors(fwd_targets)
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

    # greedy recompute: move cheap producers of saved values into the backward
    moved = True
    while moved:
        moved = False
        for v in list(saved):
            n = v.node
            if v in primal or n is None or n.op in NOT_RECOMPUTED or \
                    OPS[n.op].kind not in CHEAP_KINDS or len(n.outputs) != 1:
                continue
            operands = [x for x in n.inputs if isinstance(x, Value)]
            new = [x for x in dict.fromkeys(operands) if x not in saved]
            # a view is free to recompute; other cheap ops must also save bytes
            extra, own = sum(_bytes(x, primal) for x in new), _bytes(v, primal)
            if extra < own or (extra == own and OPS[n.op].kind == "view"):
                saved.remove(v)
                saved += new
                bwd.add(n)
                moved = True
    order = {n: i for i, n in enumerate(joint.nodes)}
    saved.sort(key=lambda v: -1 if v in primal else order[v.node])
    fwd_nodes = [n for n in joint.nodes if n in fwd]
    bwd_nodes = [n for n in joint.nodes if n in bwd]

    forward = Graph(joint.name.replace("_joint", "") + "_forward", list(joint.inputs[:n_primal]),
                    fwd_nodes, list(fwd_targets[:n_out]) + [v for v in saved if v not in primal])
    for i, v in zip(mutated_inputs, fwd_targets[n_out:n_out + n_mut]):
        forward.mutated[i] = v
    forward.guards = [Guard(v, g.expected, g.loc)
                      for v, g in zip(fwd_targets[n_out + n_mut:k], guards)]

    table, subst, bwd_inputs = [], {}, []
    for j, v in enumerate(saved):
        idx = joint.inputs.index(v) if v in primal else None
        name = v.name if v in primal else f"s{j}"
        nv = Value(v.type, None, len(bwd_inputs), name)
        subst[v] = nv
        bwd_inputs.append(nv)
        table.append(SavedValue(name, v.type, "input" if idx is not None else
                                (v.node.loc or "?"), idx))
    for ct in cotangents:
        nv = Value(ct.type, None, len(bwd_inputs), ct.name)
        subst[ct] = nv
        bwd_inputs.append(nv)
    nodes = []
    for n in bwd_nodes:
        m = Node(n.op, [subst.get(x, x) if isinstance(x, Value) else x for x in n.inputs],
                 dict(n.attrs), [], n.loc, subst.get(n.view_of) if n.view_of is not None
                 else None)
        m.outputs = [Value(o.type, m, o.index) for o in n.outputs]
        subst.update(zip(n.outputs, m.outputs))
        nodes.append(m)
    backward = Graph(forward.name.replace("_forward", "_backward"), bwd_inputs, nodes,
                     [subst[g] for g in grads])
    return forward, backward, table
