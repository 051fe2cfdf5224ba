"""CompiledFunctionBackward: the one autograd node behind a compiled function's outputs.
It runs the compiled backward graph; saved inputs and outputs are version-checked exactly as
eager saved tensors are."""
import numpy as np

from . import grad_mode
from .node import FREED, Node, SavedTensor, fix_grads, gradient_edge, user_location
from .tensor import Tensor


class CompiledFunctionBackward(Node):
    __slots__ = ("entry", "_saved", "_inputs", "_rng_state", "_in_meta", "_out_meta", "_where")

    @property
    def _nout(self):
        return len(self._out_meta)

    @classmethod
    def attach(cls, entry, tensors, results, saved_arrays, rng_state=None):
        node = cls()
        node.entry = entry
        node._where = user_location()
        node.next_functions = tuple(
            (gradient_edge(tensors[i]) if k not in entry.unused else None) or (None, 0)
            for k, i in enumerate(entry.diff_inputs))
        node._in_meta = tuple((tensors[i]._data.shape, tensors[i]._dtype)
                              for i in entry.diff_inputs)
        node._out_meta = [(results[i]._data.shape, results[i]._dtype)
                          for i in entry.diff_outputs]
        node._rng_state = None if rng_state is None else np.array(rng_state)
        # every input, for create_graph (the forward is replayed to rebuild the history)
        node._inputs = [SavedTensor(t) for t in tensors]
        fwd, n_out = entry.forward, entry.n_out
        out_pos = {}
        for k, v in enumerate(fwd.outputs[:n_out]):
            out_pos.setdefault(v, k)
        saved, j = [], 0
        for s in entry.saved:
            if s.input_index is not None:
                saved.append(node._inputs[s.input_index] if s.input_index < len(tensors)
                             else node._rng_state)
                continue
            v = fwd.outputs[n_out + j]
            if v in out_pos:               # also an output: the caller may modify it in place
                k = out_pos[v]
                saved.append(SavedTensor(results[k], is_output=True,
                                         output_nr=_nr(entry, k)))
            else:
                saved.append(saved_arrays[j])
            j += 1
        node._saved = saved
        for k, i in enumerate(entry.diff_outputs):
            r = results[i]
            r._grad_fn, r._output_nr, r._requires_grad = node, k, True
        return node

    def release(self):
        self._saved = None
        self._inputs = None

    def _unpacked(self):
        if self._saved is None:
            raise RuntimeError(FREED)
        return [s.unpack(self) if isinstance(s, SavedTensor) else s for s in self._saved]

    def apply(self, grads):
        entry = self.entry
        grads = [g if g is not None else Tensor._from_array(np.zeros(m[0], m[1].np))
                 for g, m in zip(grads, self._out_meta)]
        saved = self._unpacked()
        if grad_mode.state.grad_enabled:
            outs = self._differentiable(saved, grads)
        else:
            from .compiled import backward_run
            feeds = [s._data if isinstance(s, Tensor) else s for s in saved] + \
                    [g._data for g in grads]
            outs = [Tensor._from_array(o) for o in backward_run(entry)(feeds)]
        return fix_grads(outs, self.next_functions, self._in_meta)

    def _differentiable(self, saved, grads):
        """create_graph: replay forward and backward graphs through the dispatcher, so the
        gradients carry history back to the inputs."""
        from ..tracer.vjp import replay
        entry = self.entry
        inputs = [s.unpack(self) for s in self._inputs]
        if self._rng_state is not None:
            inputs.append(Tensor._from_array(self._rng_state))
        env = replay(entry.forward, inputs)
        feeds, j = [], 0
        for s, value in zip(entry.saved, saved):
            if s.input_index is not None:
                feeds.append(inputs[s.input_index])
            else:
                feeds.append(env[entry.forward.outputs[entry.n_out + j]])
                j += 1
        env = replay(entry.backward, feeds + list(grads))
        return [env[v] for v in entry.backward.outputs]


def _nr(entry, k):
    return entry.diff_outputs.index(k) if k in entry.diff_outputs else 0
