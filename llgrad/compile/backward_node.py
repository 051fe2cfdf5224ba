"""CompiledFunctionBackward: the one autograd node behind a compiled function's outputs.
It runs the compiled backward graph; saved inputs and outputs are version-checked exactly as
eager saved tensors are.

attach() runs on every call of a compiled function with grad on, so what is the same on
every call of one compiled entry (which inputs get edges, where each saved value comes
from, the gradient shapes) is worked out once per entry (_Layout). The inputs are not
wrapped in SavedTensor objects: their versions (and grad_fn names, for the message) are
recorded, and a SavedTensor is made only to raise eager's error when a version differs."""
import weakref

import numpy as np

from ..ir.graph import Value
from ..runtime import anomaly, grad_mode, trace_state
from ..runtime.autograd_api import grad as autograd_grad
from .fastpath import fresh_tensors
from . import function_replays, output_hooks, replayed_graph
from .backends import backward_run
from .saved_inputs import checked_input
from ..runtime.node import Node, _sequence, fix_grads, gradient_edge
from ..runtime.saved_tensor import FREED, SavedTensor, user_location
from ..runtime.tensor import Tensor
from ..tracer.control_ops import replay

_NO_EDGE = (None, 0)


class _Layout:
    """What attach() needs of an entry that does not change between its calls."""
    __slots__ = ("edges", "saved", "in_meta", "out_meta", "out_nrs", "check_inputs",
                 "check_outputs", "deps", "order")

    def __init__(self, entry, tensors, results):
        self.deps = None        # (output_hooks.py)
        # the input behind each gradient edge; None where the gradient is unused
        self.edges = tuple(None if k in entry.unused else i
                           for k, i in enumerate(entry.diff_inputs))
        # shapes and dtypes are part of the entry's guard key: the same on every call
        self.in_meta = tuple((tensors[i]._data.shape, tensors[i]._dtype)
                             for i in entry.diff_inputs)
        # the edges in the order eager's engine readies the leaves' nodes (their hooks and
        # .grad; output_notes.leaf_order): the gradients are put in that order too
        self.order = entry.leaf_order
        if self.order is not None:
            self.edges = tuple(self.edges[j] for j in self.order)
            self.in_meta = tuple(self.in_meta[j] for j in self.order)
        self.out_meta = tuple((results[i]._data.shape, results[i]._dtype)
                              for i in entry.diff_outputs)
        self.out_nrs = tuple((i, k) for k, i in enumerate(entry.diff_outputs))
        # the inputs and outputs eager's graph saved: their versions are checked before the
        # backward runs, whether or not the compiled backward reads them (as eager raises)
        # (each with the mask of the outputs whose eager graph reads it: a backward from
        # the others does not check it)
        eager_inputs, eager_outputs, _ = entry.eager_saved
        self.check_inputs = tuple(eager_inputs.items())
        self.check_outputs = tuple((k, entry.diff_outputs.index(k) if k in entry.diff_outputs
                                    else 0, mask, made)
                                   for k, (mask, made) in eager_outputs.items())
        # where each saved value comes from: ("input", index), ("rng", None),
        # ("output", (position, output_nr)) or ("array", index in the saved arrays)
        fwd, n_out = entry.forward, entry.n_out
        out_pos = {}
        for k, v in enumerate(fwd.outputs[:n_out]):
            out_pos.setdefault(v, k)
        saved, j = [], 0
        for s in entry.saved:
            if s.input_index is not None:
                saved.append(("input", s.input_index) if s.input_index < len(tensors)
                             else ("rng", None))
                continue
            v = fwd.outputs[n_out + j]
            if v in out_pos and out_pos[v] in eager_outputs:   # version-checked as eager's
                saved.append(("output", out_pos[v]))
            elif v in out_pos or _input_view(v):
                # an array the caller may write in place (an output eager did not save, or a
                # view of an input) where eager would not object: the backward keeps a copy
                saved.append(("copy", j))
            else:
                saved.append(("array", j))
            j += 1
        self.saved = tuple(saved)


def _copy_with_layout(a):
    """A copy of array a with a's own strides: the backward graph was traced with them (a
    broadcast or stepped input view); np.array would make it dense (a stride-0 dim then
    comes out in Fortran order), which the backward's kernel refuses."""
    if a.size == 0 or a.flags.c_contiguous:
        return np.array(a)
    lo, hi = np.lib.array_utils.byte_bounds(a)
    it = a.itemsize
    buf = np.empty((hi - lo) // it, a.dtype)
    out = np.lib.stride_tricks.as_strided(buf[(a.__array_interface__["data"][0] - lo) // it:],
                                          a.shape, a.strides)
    out[...] = a
    return out


class CompiledFunctionBackward(Node):
    own_hooks = True        # (its results' hooks: output_hooks.py)
    __slots__ = ("entry", "_layout", "_saved", "_inputs", "_held", "_rng_state",
                 "_where", "_checked", "_before", "_given", "_freed", "_replayed")

    def __init__(self, entry, layout):
        # Node.__init__ inlined (as OpNode does): this runs on every call
        self.next_functions = ()
        self._seq = next(_sequence)
        self._pre_hooks = self._post_hooks = self._retained = None
        self.entry, self._layout = entry, layout
        # masks of outputs: given a gradient by the last backward, and backpropagated
        # through by backwards that freed eager's graph behind them (entry.frees)
        self._given, self._freed, self._replayed = 0, 0, None   # (replayed_graph.py)

    @property
    def _nout(self):
        return len(self._layout.out_meta)

    @classmethod
    def attach(cls, entry, tensors, results, saved_arrays, rng_state=None, before=None):
        """before: {input: its array before the call} of the inputs in replay_kept."""
        layout = entry._node_layout
        if layout is None:
            layout = entry._node_layout = _Layout(entry, tensors, results)
        node = cls(entry, layout)
        node._where = user_location()
        node.next_functions = tuple([_NO_EDGE if i is None else
                                     (gradient_edge(tensors[i]) or _NO_EDGE)
                                     for i in layout.edges])
        # every input is kept (with its version) for create_graph, which replays the forward,
        # and its memory then (what eager's saved views read after `p.data = y`: saved_inputs)
        held = []
        for i, t in enumerate(tensors):
            if t._inference and i in entry.eager_saved[0]:
                SavedTensor(t)          # raises eager's error: inference tensors cannot be saved
            st = t._storage
            held.append((st.version, t._data, st))
        node._inputs, node._held = tensors, held
        node._rng_state = None if rng_state is None else np.array(rng_state)
        node._before = before
        saved = []
        for kind, x in layout.saved:
            if kind == "array" or kind == "output":
                saved.append(saved_arrays[x] if kind == "array" else None)
            elif kind == "copy":
                saved.append(_copy_with_layout(saved_arrays[x]))
            else:                           # an input (by index) or the RNG state
                saved.append(node._rng_state)
        node._saved = saved
        node._checked = [(SavedTensor(results[k], is_output=True, output_nr=nr),
                          None if made[2] else weakref.ref(results[k]))
                         for k, nr, _, made in layout.check_outputs]
        for i, k in layout.out_nrs:
            r = results[i]
            r._grad_fn, r._output_nr, r._requires_grad = node, k, True
        return node

    def captures(self, grads, pairs):
        return output_hooks.captures(self, grads, pairs)

    def release(self):
        if self.entry.reusable:         # (eager's graph freed nothing: neither does this)
            return
        self._freed |= self._given
        if self._frees_all(self._freed):    # (else a backward from the others runs still)
            self._saved = self._inputs = self._held = self._checked = self._before = None

    def _frees_all(self, given):
        """Whether after backwards from the outputs in mask `given` no other backward can
        run: every output's graph holds saved values, and each was backpropagated through
        (the compiled backward needs all its saved values for any output's gradient)."""
        return all(given >> j & 1 and f for j, f in enumerate(self.entry.frees))

    def _input(self, k):
        """Input k, checked against the version it had when the forward ran."""
        return checked_input(self, k)

    def _feeds(self, given):
        """The saved values' arrays, each version-checked as eager unpacks saved tensors
        (those the graph behind an output given a gradient, in mask `given`, reads)."""
        if self._saved is None or self._replayed is not None and \
                replayed_graph.freed(self, given):     # (a create_graph replay's, freed)
            raise RuntimeError(FREED)
        if self._freed:
            for j, f in enumerate(self.entry.frees):
                if given >> j & 1 and f & self._freed:     # (eager's graph behind output
                    raise RuntimeError(FREED)               # j was freed)
        layout = self._layout
        for k, mask in layout.check_inputs:
            if mask & given:
                self._input(k)
        outputs = {}
        for (s, ref), (k, _, mask, made) in zip(self._checked, layout.check_outputs):
            data, storage = s.tensor        # (a saved output is kept as (data, storage))
            if mask & given and storage.version != s.version:
                _raise_modified(self, s, ref, made)
            outputs[k] = data
        feeds = []
        for (kind, x), v in zip(layout.saved, self._saved):
            if kind == "input":
                feeds.append(self._input(x)._data)
            elif kind == "output":
                feeds.append(outputs[x])
            else:
                feeds.append(v)
        return feeds

    def apply(self, grads):
        return self._apply(grads, False)

    def apply_last(self, grads):
        """apply, when it is the last (the engine frees the graph after it): the saved
        values are handed to the kernel, which lets go of them before it allocates its
        late outputs (codegen.lower.release_split)."""
        return self._apply(grads, True)

    def _apply(self, grads, last):
        layout = self._layout
        hooked = None
        if self._pre_hooks or self._retained:   # (the engine leaves them to this node)
            ran = output_hooks.run_hooks(self, grads, layout)
            if ran is None:
                hooked = output_hooks.hooked(self)
            else:
                grads = ran
        given = 0
        for j, g in enumerate(grads):
            if g is not None:
                given |= 1 << j
        self._given = given
        partial = len(grads) > 1 and any(g is None for g in grads)
        if hooked:                          # (a hooked output others are computed from)
            self._feeds(given)
            outs = self._exact(grads, hooked)
        elif grad_mode.state.grad_enabled:
            if partial:
                self._feeds(given)          # (the saved values' version checks)
                outs = self._exact(grads)
            else:
                outs = self._differentiable(grads)
        elif anomaly._state["enabled"] and anomaly._state["check_nan"]:
            self._feeds(given)              # (eager's nan check names the node of its graph
            outs = self._exact(grads)       # that made the nan: the replayed forward's)
        elif any(g is not None and type(g._data) is not np.ndarray for g in grads):
            # gradients batched by vmap (jacobian, jacrev): their data is no array a
            # kernel can read; the forward replayed through the dispatcher batches them
            self._feeds(given)
            outs = self._exact(grads)
        else:
            feeds = self._feeds(given)
            if last and not self.entry.reusable and not partial and \
                    self._frees_all(given | self._freed):
                self._saved = None
            for g, (shape, dt) in zip(grads, layout.out_meta):
                # (a gradient given in another dtype, y.backward(long or float64 ones), is
                # cast to its output's, as eager's nodes and PyTorch's engine take it)
                a = g._data if g is not None else np.zeros(shape, dt.np)
                feeds.append(a if a.dtype == dt.np else a.astype(dt.np))
            run = self.entry._backward_run or backward_run(self.entry)
            outs = fresh_tensors(run(feeds))
            if partial and (trace_state.state.tracer is not None or not _finite(outs)):
                # the zeros given for outputs without a gradient times an infinite local
                # derivative (sqrt at 0) made NaN where eager, which runs none of their
                # graph, gives a number
                outs = self._exact(grads)
        reach = self.entry.reach
        if reach is not None and any(g is None for g in grads):   # (eager's graph of
            m = 0                       # the outputs given no gradient is not run: inputs
            for g, r in zip(grads, reach):      # only it reaches get none, not zeros)
                if g is not None:
                    m |= r
            outs = [o if m >> j & 1 else None for j, o in enumerate(outs)]
        if layout.order is not None:
            outs = [outs[j] for j in layout.order]
        return fix_grads(outs, self.next_functions, layout.in_meta)

    def _replayed_inputs(self):
        """The forward's inputs as the call read them: those it wrote in place (never
        differentiated: entry._check_mutated) from their copies made before the call."""
        before = self._before or {}
        return [Tensor._from_array(before[k]) if k in before else self._input(k)
                for k in range(len(self._inputs))]

    @function_replays.checked
    def _exact(self, grads, hooked=()):
        """The gradients of the outputs given one alone, as eager computes them: the forward
        replayed through the dispatcher and differentiated by the engine, from detached
        inputs, or (create_graph) from views of them that carry the gradients' history on
        (the engine stops at them: the inputs' own hooks run once, when it reaches them)."""
        entry = self.entry
        create = grad_mode.state.grad_enabled
        inputs = self._replayed_inputs()
        leaves = []
        with grad_mode.enable_grad():
            for i in entry.diff_inputs:
                t = inputs[i]
                inputs[i] = t.view_as(t) if create else t.detach().requires_grad_()
                leaves.append(inputs[i])
            if self._rng_state is not None:
                inputs.append(Tensor._from_array(self._rng_state))
            env = replayed_graph.replay_noted(self, entry.forward, inputs, create)
            for nr in hooked:               # (the hooks of results others are made from)
                t = env[entry.forward.outputs[entry.diff_outputs[nr]]]
                if t.requires_grad:
                    t.register_hook(output_hooks.replayed_hook(self, nr))
        given = [(env[entry.forward.outputs[i]], g)
                 for i, g in zip(entry.diff_outputs, grads) if g is not None]
        return list(autograd_grad([o for o, _ in given], leaves, [g for _, g in given],
                                  create_graph=create, allow_unused=True))

    @function_replays.checked
    def _differentiable(self, grads):
        """create_graph: replay forward and backward graphs through the dispatcher, so the
        gradients carry history back to the inputs."""
        entry = self.entry
        self._feeds(self._given)            # the saved values' version checks
        grads = [g if g is not None else Tensor._from_array(np.zeros(shape, dt.np))
                 for g, (shape, dt) in zip(grads, self._layout.out_meta)]
        inputs = self._replayed_inputs()
        if self._rng_state is not None:
            inputs.append(Tensor._from_array(self._rng_state))
        env = replayed_graph.replay_noted(self, entry.forward, inputs, True)
        feeds, j = [], 0
        for s in entry.saved:
            if s.input_index is not None:
                feeds.append(inputs[s.input_index])
            else:
                feeds.append(env[entry.forward.outputs[entry.n_out + j]])
                j += 1
        env = replay(entry.backward, feeds + list(grads))
        return [env[v] for v in entry.backward.outputs]


def replay_kept(entry):
    """The inputs the forward writes in place whose values before the call its
    differentiable outputs are computed from: a replay of the forward (create_graph,
    _exact) needs those values, which the write-back replaced."""
    kept = entry.replay_kept
    if kept is None:
        fwd = entry.forward
        written = {id(fwd.inputs[i]): i for i in fwd.mutated if i != entry.rng_index}
        found, seen = set(), set()
        stack = [fwd.outputs[i] for i in entry.diff_outputs]
        while stack:
            v = stack.pop()
            if id(v) in seen:
                continue
            seen.add(id(v))
            if v.node is None:
                if id(v) in written:
                    found.add(written[id(v)])
            else:
                stack.extend(x for x in v.node.inputs if isinstance(x, Value))
        kept = entry.replay_kept = tuple(sorted(found))
    return kept


def _raise_modified(node, s, ref, made):
    """Eager's error for saved output s written in place after the call: it names the node
    of eager's graph that made the output (Exp, not this node), or, where eager saved the
    output as the input of a later op, the output's grad_fn now (Add after y.add_(1))."""
    name, nr, _, shape = made
    t = None if ref is None else ref()
    if t is not None and t.grad_fn is not None and t.grad_fn is not node:
        saved = SavedTensor.__new__(SavedTensor)
        saved.tensor, saved.version, saved.is_output, saved.output_nr = t, s.version, False, 0
        saved.had_history = False
        saved.unpack(node)
    data, storage = s.tensor
    if data.shape != shape:         # (the output is a view of what eager saved: the message
        s.tensor = (np.broadcast_to(np.zeros((), data.dtype), shape), storage)  # gives its shape)
    s.output_nr = nr
    s.unpack(type(name, (), {"_where": node._where})())


def _finite(tensors):
    for t in tensors:
        if t is not None and t._dtype.is_floating_point and not np.isfinite(t._data).all():
            return False
    return True


def _input_view(v):
    """Whether forward value v is a graph input or a view of one (its memory the caller's)."""
    while v.node is not None and v.node.view_of is not None:
        v = v.node.view_of
    return v.node is None


class FreedBackward(Node):
    """The grad_fn of a result that a compiled training step already backpropagated
    through (it ran `loss.backward()`): as in eager, a second backward raises."""
    __slots__ = ()
    _nout = 1

    def __init__(self):
        Node.__init__(self)

    def apply(self, grads):
        raise RuntimeError(FREED)
