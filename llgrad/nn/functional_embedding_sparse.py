"""Embedding lookups with sparse gradients (F.embedding / nn.Embedding with sparse=True), as
PyTorch's: the weight's gradient is a sparse COO tensor (runtime/sparse_coo.py) with one entry
per looked-up index (in the input's order, uncoalesced, padding_idx's left out) whose value is
that position's row of the output gradient; AccumulateGrad appends such gradients to a sparse
.grad (node.py). The optimisers that take them: SGD, Adagrad and SparseAdam (Adam raises, as
PyTorch's). A sparse gradient lives outside compiled code: a traced lookup ends the trace (the
call runs eagerly, with the warning)."""
import numpy as np

from ..runtime import grad_mode, trace_state
from ..runtime.node import AccumulateGrad, Node, gradient_edge
from ..runtime.sparse_coo import SparseCOOTensor, _index_tensor


class EmbeddingBackward0(Node):
    """The weight's sparse gradient of a lookup (PyTorch's embedding_sparse_backward)."""
    __slots__ = ("_idx", "_num_weights", "_padding_idx", "_scale_grad_by_freq")

    def __init__(self, idx, num_weights, padding_idx, scale_grad_by_freq, weight_edge):
        Node.__init__(self)
        self._idx = idx                     # (the flattened int64 indices, a NumPy array)
        self._num_weights = num_weights
        self._padding_idx = padding_idx
        self._scale_grad_by_freq = scale_grad_by_freq
        self.next_functions = (weight_edge, (None, 0))

    def apply(self, grads):
        if self._scale_grad_by_freq:
            raise RuntimeError("embedding_backward: scale_grad_by_freq not supported with "
                               "sparse gradients")
        g = grads[0]
        d = g.shape[-1]
        idx = self._idx
        values = g.reshape(-1, d)
        if self._padding_idx is not None:
            keep = idx != self._padding_idx
            if not keep.all():
                idx, values = idx[keep], values[_index_tensor(np.nonzero(keep)[0])]
        # (values as PyTorch's: a view of the output gradient where reshape can make one, a
        # stride-0 one from sum's backward too; sparse_add.py merges contiguous ones only)
        grad = SparseCOOTensor._make(_index_tensor(idx.reshape(1, -1)), values,
                                     (self._num_weights, d), idx.size <= 1)
        if type(self.next_functions[0][0]) is not AccumulateGrad:
            grad = grad.to_dense()      # (into other nodes llgrad passes the dense gradient)
        return [grad, None]


def sparse_embedding(input, weight, padding_idx, scale_grad_by_freq):
    """weight's rows at input, with EmbeddingBackward0 giving weight a sparse gradient."""
    tracer = trace_state.state.tracer
    if tracer is not None:
        tracer.graph_break("embedding(sparse=True) gives a sparse gradient, which compiled "
                           "code does not")
    idx = np.ascontiguousarray(input._data, dtype=np.int64).reshape(-1)
    with grad_mode.no_grad():
        out = weight.index_select(0, _index_tensor(idx)).reshape(
            tuple(input.shape) + (weight.shape[1],))
    node = EmbeddingBackward0(idx, weight.shape[0], padding_idx, scale_grad_by_freq,
                              gradient_edge(weight))
    out._grad_fn, out._output_nr, out._requires_grad = node, 0, True
    return out
