"""A compiled backward's reads of its call's inputs, as eager's saved tensors give them:
checked against the version each input had when the call ran, and read from the memory
eager's saved tensor reads after `p.data = y` between the call and the backward.

`p.data = y` gives the tensor p y's memory (runtime/tensor.py). A saved tensor that is p
itself then reads y (and checks y's version against the one p's memory had at the call),
as PyTorch's saved leaf does; one that is a view of p (nn.Linear's `weight.t()`) or a value
computed from it keeps p's old memory and checks that memory's version. Compiled backwards
read inputs in place of both (codegen reads the weight untransposed: entry._partition), so
the kind of save eager made decides what the read gives (eager_graph.eager_saved's kinds).
Where eager's graph saved p both ways, no one value stands for both: the backward raises."""
from ..runtime.node import gradient_edge
from ..runtime.saved_tensor import SavedTensor
from ..runtime.tensor import Tensor

ITSELF, VIEW = 1, 2         # (eager_graph.eager_saved: how eager's graph saved an input)


def checked_input(node, k):
    """Input k of node's call (a CompiledFunctionBackward), as eager's saved tensor of it
    unpacks, with eager's error where that was modified in place since the call."""
    t = node._inputs[k]
    version, data, storage = node._held[k]
    if t._storage is not storage:       # (p.data = y since the call)
        kind = node.entry.eager_saved[2].get(k, VIEW)
        if kind == ITSELF | VIEW:
            raise RuntimeError(
                "llgrad.compile: the memory of an input of a compiled call was replaced "
                "(`.data = ...`) before the backward, and eager's graph saved both the input "
                "and a view of it; the compiled backward cannot read both values. Run the "
                "function eagerly, or assign .data after the backward.")
        if kind == VIEW:        # (a view or a value of the old memory: as the call read it)
            t = _old_memory(t, data, storage)
    if t._storage.version != version:
        s = SavedTensor.__new__(SavedTensor)     # what eager would have saved, to raise
        s.tensor, s.version, s.is_output, s.output_nr = t, version, False, 0
        s.had_history = False
        s.unpack(node)
    return t


def _old_memory(t, data, storage):
    """Input t as the call read it: its memory then, where t's gradient goes (a replay with
    create_graph differentiates it into t's .grad, as eager's saved view leads there)."""
    old = Tensor._from_array(data, storage)
    edge = gradient_edge(t)
    if edge is not None:
        if edge[0] is t._acc:           # (a leaf: its AccumulateGrad, as saved_tensor's)
            old._acc = t._acc
        else:
            old._grad_fn, old._output_nr = edge
        old._requires_grad = True
    return old
