"""The graph a compiled call's forward replayed through the dispatcher makes, where a
gradient must be differentiable itself (create_graph: CompiledFunctionBackward's
_differentiable and _exact), standing for eager's forward graph when it is freed.

A second-order gradient's graph leads through the replay's nodes, not through the call's
CompiledFunctionBackward: a backward from it without retain_graph frees those nodes, as
eager's frees its forward's. Eager's later backward from an output whose graph leads
through a freed node raises ('Trying to backward through the graph a second time'); so the
compiled call's node notes, per output, the replay's nodes behind it that saved values, and
raises where one of them was freed (freed)."""
from ..runtime import backward_run
from ..runtime.node import _sequence
from ..runtime.saved_tensor import FREED_SLOT
from ..runtime.tensor import Tensor
from ..tracer.control_ops import replay


def replay_noted(node, graph, inputs, noted):
    """replay(graph, inputs), graph the node's entry's forward; noted (the replay is
    differentiable, create_graph): the replay's nodes behind each differentiable output
    that saved values are noted on node (node._replayed)."""
    start = next(_sequence)     # (the replay's nodes are numbered after this)
    env = replay(graph, inputs)
    if noted:
        entry = node.entry
        outs = [env.get(graph.outputs[i]) for i in entry.diff_outputs]
        node._replayed = (node._replayed or ()) + (tuple(_saving_nodes(t, start) for t in outs),)
    return env


def _saving_nodes(t, start):
    """The nodes made since sequence number start that t's graph leads through and that
    saved values (the replay's own: the inputs' graphs are older)."""
    found, seen = [], set()
    stack = [t._grad_fn] if isinstance(t, Tensor) else []
    while stack:
        n = stack.pop()
        if n is None or id(n) in seen or getattr(n, "_seq", -1) <= start:
            continue
        seen.add(id(n))
        if getattr(n, "_saved", None):
            found.append(n)
        stack.extend(f for f, _ in n.next_functions)
    return tuple(found)


def freed(node, given):
    """Whether a backward from the outputs in mask `given` leads through a node of a replay
    noted on node that an earlier backward without retain_graph freed (eager would raise).
    One this backward freed is not: a second-order gradient's graph leads through both the
    replay's nodes and node (the first-order gradient of an output made from it: `2 * y`
    of y ** 2), where eager's leads through its forward's nodes once (a hessian-vector
    product)."""
    now = backward_run.current.now
    for per_output in node._replayed:
        for j, nodes in enumerate(per_output):
            if given >> j & 1 and any(getattr(n, "_freed", False) not in (False, now) and any(
                    v is FREED_SLOT for v in n._saved.values()) for n in nodes):
                return True
    return False
