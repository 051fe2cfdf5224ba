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
cut must not recompute them in the backward, which would undo the move."""
from .decompose import _Emitter, _applies
from .graph import Value
from .optable import OPS
from .passes import _key


def _decomposition_keys(node):
    """{cse key: decomposition node} of a forward composite's primitive nodes, built apart
    (the joint graph is unchanged)."""
    scratch = []
    OPS[node.op].decompose(node, _Emitter(scratch, node.loc))
    return {_key(s, {}): s for s in scratch if len(s.outputs) == 1}


def shared_with_forward(joint, fwd, bwd):
    """-> (backward nodes to move into the forward, the dear ones among them to pin)."""
    keys = {}
    for n in joint.nodes:
        op = OPS.get(n.op)
        if n in fwd and op is not None and op.decompose is not None and not op.recompute \
                and _applies(n):
            keys.update(_decomposition_keys(n))
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
