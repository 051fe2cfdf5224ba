"""Backward nodes that repeat part of a forward composite's own computation, moved into the
forward (ir/partition.py) so that the forward's lowering computes them once.

Exact GELU is the case: its result is x * cdf(x) with cdf = 0.5 * (1 + erf(x / sqrt(2))),
and its VJP evaluates the same cdf again for the derivative cdf + x * pdf(x). Left in the
backward, that is a second erf pass over every element (about half of GELU's backward
kernel; erf is the dearest elementwise function llgrad lowers). Moved into the forward, the
chain is the same nodes as GELU's decomposition (ir/decompose.py writes it so), which the
forward's lowering merges with it (passes.cse): the forward stores cdf once more and the
backward reads it, with no erf. Tanh GELU likewise shares its tanh.

Only nodes whose operands are forward values (no cotangent) and that equal, operand for
operand, a node of the decomposition of a forward composite whose OpDef says
recompute=False are moved. The dear ones among them (cost > 1: erf, tanh) are pinned: the
cut must not recompute them in the backward, which would undo the move.

A backward composite can hold such a repeat inside it: fused_lstm_cell_backward evaluates
the gates' sigmoid and tanh again from the pre-activation gates, four transcendental
functions per element per step. A backward composite whose own decomposition repeats a dear
node of a forward composite's is therefore written as its primitives before the cut
(expand_shared), so that the repeat is moved like any other: the forward stores the
activated gates in place of the pre-activation ones (the same bytes, as PyTorch's CPU LSTM
keeps its workspace) and the backward reads them."""
from .decompose import _Emitter, _applies, expand_composites
from .graph import Value
from .optable import OPS
from .passes import _key


def _decomposition_keys(node):
    """{cse key: decomposition node} of a forward composite's primitive nodes, built apart
    (the joint graph is unchanged)."""
    scratch = []
    OPS[node.op].decompose(node, _Emitter(scratch, node.loc))
    return {_key(s, {}): s for s in scratch if len(s.outputs) == 1}


def _forward_keys(joint, fwd):
    keys = {}
    for n in joint.nodes:
        op = OPS.get(n.op)
        if n in fwd and op is not None and op.decompose is not None and not op.recompute \
                and _applies(n):
            keys.update(_decomposition_keys(n))
    return keys


def _repeats_dear(node, keys):
    """Whether node's decomposition holds a dear node (cost > 1) equal to one of keys."""
    scratch, match = [], {}
    OPS[node.op].decompose(node, _Emitter(scratch, node.loc))
    for s in scratch:
        twin = keys.get(_key(s, match)) if len(s.outputs) == 1 else None
        if twin is not None:
            if OPS[s.op].cost > 1:
                return True
            match[s.outputs[0]] = twin.outputs[0]
    return False


def expand_shared(joint, fwd, bwd):
    """joint with the backward composites that repeat a dear part of a forward composite
    written as their primitives (joint itself when there is none)."""
    keys = _forward_keys(joint, fwd)
    if not keys:
        return joint
    only = {n for n in joint.nodes if n in bwd and _applies(n) and _repeats_dear(n, keys)}
    return expand_composites(joint, only) if only else joint


def shared_with_forward(joint, fwd, bwd):
    """-> (backward nodes to move into the forward, the dear ones among them to pin)."""
    keys = _forward_keys(joint, fwd)
    if not keys:
        return set(), set()
    match, moved = {}, set()
    for n in joint.nodes:          # (in order: a chain's operands are matched before it)
        if n not in bwd or len(n.outputs) != 1:
            continue
        twin = keys.get(_key(n, match))
        if twin is not None:
            match[n.outputs[0]] = twin.outputs[0]
            moved.add(n)
    pinned = {n for n in moved if OPS[n.op].cost > 1}
    # only a chain that reaches a dear node is worth a saved value
    needed, stack = set(), list(pinned)
    while stack:
        n = stack.pop()
        if n in needed:
            continue
        needed.add(n)
        stack.extend(x.node for x in n.inputs if isinstance(x, Value) and x.node in moved)
    return needed, pinned
