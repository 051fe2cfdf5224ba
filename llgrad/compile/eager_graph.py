"""What eager's graph behind a traced call's outputs saves for backward and frees: the
compiled backward node checks the same versions (backward_node.py) and raises "backward
through the graph a second time" where eager's graph would."""
from ..runtime.saved_tensor import SavedTensor
from .saved_inputs import ITSELF, VIEW


def eager_saved(outs, tensors, diff_out, unpacked):
    """({input position: mask}, {output position: (mask, made)}) of the tensors eager's
    graph behind the outputs saved for backward and its backward unpacks (the ids in
    unpacked); bit j of a mask: the graph behind differentiable output j (diff_out[j])
    unpacks it. A compiled backward checks exactly their versions, for the outputs given a
    gradient, so an in-place change after the call raises where eager raises, and only
    there. made: (node class name, output_nr, whether that node saved it as its own output,
    the shape saved) of the eager node that made the output, which eager's error names.
    Third, {input position: kind} of the inputs saved: saved_inputs.ITSELF (the input
    tensor itself), VIEW (another tensor over its memory) or both (what a backward reads
    after `p.data = y` between the call and it)."""
    storage_in, itself, kinds = {}, {}, {}
    for i, (_, t) in enumerate(tensors):
        storage_in.setdefault(id(t._storage), i)
        itself.setdefault(id(t), i)
    storage_out = {}
    for k in diff_out:
        storage_out.setdefault(id(outs[k]._storage), k)
    ins, outs_saved = {}, {}
    for j, k in enumerate(diff_out):
        seen, stack = set(), [outs[k].grad_fn]
        while stack:
            node = stack.pop()
            if node is None or id(node) in seen:
                continue
            seen.add(id(node))
            for s in _saved_tensors(node):
                if id(s) not in unpacked:
                    continue
                data = s.tensor
                storage = data[1] if isinstance(data, tuple) else getattr(data, "_storage", None)
                if storage is None:
                    continue
                if id(storage) in storage_in:
                    i = storage_in[id(storage)]
                    ins[i] = ins.get(i, 0) | 1 << j
                    i = itself.get(id(data), i)
                    kinds[i] = kinds.get(i, 0) | (ITSELF if id(data) in itself else VIEW)
                elif id(storage) in storage_out:
                    o = storage_out[id(storage)]
                    mask, made = outs_saved.get(o, (0, None))
                    if made is None:    # (the nearest to the output: its backward runs first)
                        made = (type(node).__name__, s.output_nr, True,
                                data[0].shape) if s.is_output else \
                            (type(data.grad_fn).__name__, data._output_nr, False, data.shape)
                    outs_saved[o] = (mask | 1 << j, made)
            stack.extend(n for n, _ in node.next_functions)
    return dict(sorted(ins.items())), dict(sorted(outs_saved.items())), kinds


def _freed(v):
    """Whether a node's release() frees saved value v (node.py: saved tensors, lists of
    them, and the numbers PyTorch saves as wrapped tensors, SavedNumber)."""
    return isinstance(v, (SavedTensor, list)) or type(v).__name__ == "SavedNumber"


def frees(outs, diff_out, first):
    """Per differentiable output j, the mask of the outputs whose backward reaches a node of
    eager's graph behind j (the nodes the call made: from sequence number `first`) that
    holds saved values a backward frees: after a backward from j, a backward from those
    raises (x * x); a graph that holds none (x + 2) can be backpropagated through again, and
    outputs with graphs apart are backpropagated through one at a time."""
    freeing = []        # per output: the ids of the freeing nodes behind it
    for k in diff_out:
        found, seen, stack = set(), set(), [outs[k].grad_fn]
        while stack:
            node = stack.pop()
            if node is None or id(node) in seen or getattr(node, "_seq", first) < first:
                continue
            seen.add(id(node))
            saved = getattr(node, "_saved", None)
            if getattr(getattr(node, "_ctx", None), "_saved", None) or \
                    (isinstance(saved, dict) and any(map(_freed, saved.values()))) or \
                    (isinstance(saved, (list, tuple)) and saved) or \
                    type(node).__name__ == "FreedBackward":
                found.add(id(node))
            stack.extend(n for n, _ in node.next_functions)
        freeing.append(found)
    return tuple(sum(1 << i for i, other in enumerate(freeing) if mine & other)
                 for mine in freeing)


def _saved_tensors(node):
    saved = getattr(node, "_saved", None)
    if isinstance(saved, dict):
        values = saved.values()
    elif isinstance(saved, (list, tuple)):
        values = saved
    else:
        values = getattr(getattr(node, "_ctx", None), "_saved", None) or ()
    for v in values:
        for s in (v if isinstance(v, list) else (v,)):
            if hasattr(s, "version") and hasattr(s, "tensor") and s.tensor is not None:
                yield s
