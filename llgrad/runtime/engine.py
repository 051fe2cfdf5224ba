"""The autograd engine: runs backward nodes in dependency order, iteratively (no
recursion, so a chain of 100,000 ops is fine), accumulating gradients into leaves or
capturing them for autograd.grad.

The common graph of a compiled function (one root node whose edges all end at leaves)
takes a short path (_run_single, engine_short_path.py) that gives exactly what the general
one would, without its reachability search, dependency counts and heap; the gradients a
backward starts from are root_grads.py's. In the general loop, a backward of every leaf
outside a trace runs a node with no pre-hook nor retained grad in a short step of its own;
other nodes take _run_node (hooks, autograd.grad's captures, the tracer's checks)."""
import heapq
import itertools

import numpy as np

from . import dispatch, dtypes, grad_mode, trace_state
from . import fast_vjp  # noqa: F401  (the matrix products' NumPy VJPs: node.fast_vjps)
from .anomaly import _state as _anomaly, failed
from .backward_hooks import (always, hooks_allowed, run_acc, run_node_pre_hooks,
                             run_post_hooks, run_pre_hooks)
from .engine_reach import _collect, _needed  # noqa: F401  (_needed: the tests')
from .engine_short_path import _GENERAL, _add, _captured, _edge, _run_single, apply_node
from .meta_tensor import is_meta
from .node import AccumulateGrad
from .saved_tensor import where_str
from .tensor import Tensor

_grad_state = grad_mode.state
_trace_state = trace_state.state
# PyTorch's AccumulateGrad has the highest sequence number: a leaf's node runs (and its
# tensor hooks) as soon as it is ready, before any other node, however old the leaf; of
# leaves ready together, the first ready runs first
_LEAF_FIRST = 1 << 62
_new = Tensor._from_array
_SUMMED = (dtypes.float32, dtypes.float64)     # (the run loop's NumPy sums)
_SKIP = object()        # (_run_node: the node does not run)


def run_backward(roots, root_grads, retain_graph=False, create_graph=False, inputs=None,
                 accumulate=True, allow_unused=False):
    """Backpropagate root_grads from roots. With accumulate, add into the leaves' .grad
    (only those in `inputs` when given); otherwise return the gradients of `inputs`."""
    if len(roots) == 1 and _trace_state.tracer is None:
        res = _run_single(roots[0], root_grads[0], retain_graph, create_graph, inputs,
                          accumulate, allow_unused)
        if res is not _GENERAL:
            return res
    root_edges = []
    for i, (t, g) in enumerate(zip(roots, root_grads)):
        e = _edge(t)
        if e is None:
            raise RuntimeError(f"element {i} of tensors does not require grad and does not "
                               "have a grad_fn")
        root_edges.append((e, g))
    targets = None
    if inputs is not None:
        targets = {}
        for i, t in enumerate(inputs):
            e = _edge(t)
            if e is None:
                if t.requires_grad:
                    continue    # a view made under no_grad: no edge, as in PyTorch unused
                raise RuntimeError("One of the differentiated Tensors does not require grad")
            targets.setdefault(e[0], []).append((e[1], i))

    root_nodes = list(dict.fromkeys(e[0] for e, _ in root_edges))
    deps = _collect(root_nodes)
    needed = _needed(root_nodes, targets) if targets is not None else None
    buffers = {}
    for (node, nr), g in root_edges:
        buf = buffers.setdefault(node, [None] * node._nout)
        buf[nr] = _add(buf[nr], g)
    captured = [None] * (len(inputs) if inputs is not None else 0)
    ready = itertools.count(-_LEAF_FIRST)      # (the order leaves become ready in)
    heap = [(next(ready) if type(n) is AccumulateGrad else -n._seq, n)
            for n in root_nodes if deps.get(n, 0) == 0]
    heapq.heapify(heap)

    # while tracing: compile's own differentiation runs no hooks (the engine runs the
    # inputs' hooks when the compiled backward's gradients reach them); a hook that would
    # run in a backward of the user's own cannot be compiled (its Python effects would not
    # be replayed): the trace breaks
    tracer = _trace_state.tracer        # (read once: a hook that traces puts it back)
    hooks = hooks_allowed if tracer is not None else always
    if tracer is not None:      # (a step's .backward(); a graph the traced code frees)
        tracer.backward_runs += accumulate
        tracer.graph_freed |= not retain_graph
    state, prev = _grad_state, _grad_state.grad_enabled
    state.grad_enabled = create_graph
    heappop, heappush = heapq.heappop, heapq.heappush
    # gradients of one slot summed without the dispatcher (NumPy): only where the sum is no
    # graph op, traced op or batched op; `sums`: the slots holding a sum made here
    plain = not create_graph and tracer is None and dispatch.batching is None and \
        dispatch.forward_ad is None         # (a dual gradient sums through the add op)
    sums = set()
    fast = targets is None and tracer is None   # (every node's hooks always run then)
    try:
        while heap:
            _, node = heappop(heap)
            grads = buffers.pop(node, None) or [None] * node._nout
            if type(node) is AccumulateGrad:
                # as in PyTorch, with `inputs` the node of a leaf that is not one of them
                # does not run at all (nor do its leaf's hooks)
                if targets is not None and node not in targets:
                    continue
                leaf = node._variable()
                if leaf is not None and leaf._hooks and hooks("a tensor hook", node):
                    grads = run_pre_hooks(node, grads)
                if targets is not None and not accumulate:
                    for _, i in targets[node]:
                        captured[i] = grads[0]
                if accumulate:
                    if node._hooked and hooks("an AccumulateGrad hook", node):
                        run_acc(node, grads, create_graph)      # (handed over, as below)
                    elif grads[0] is not None:
                        g, grads[0] = grads[0], None    # handed over (as above)
                        node.accumulate(g, create_graph, True)
                continue
            if fast and not (node._pre_hooks or node._retained):
                # (a backward of every leaf, not traced, at a node with no pre-hook nor
                # retained grad: what _run_node does there, without its checks)
                if grads[0] is not None if len(grads) == 1 else \
                        any(g is not None for g in grads):
                    outs = apply_node(node, grads, retain_graph)
                    if node._post_hooks:
                        outs = run_post_hooks(node, outs, grads)
                else:
                    outs = [None] * len(node.next_functions)
            else:
                outs = _run_node(node, grads, targets, needed, hooks, captured, inputs, tracer,
                                 retain_graph, create_graph, accumulate)
                if outs is _SKIP:
                    continue
            if not retain_graph:
                node.release()
            for (child, nr), g in zip(node.next_functions, outs):
                if child is None:
                    continue
                if g is not None:
                    buf = buffers.get(child)
                    if buf is None:
                        buf = buffers[child] = [None] * child._nout
                    old = buf[nr]
                    if old is None:
                        buf[nr] = g
                    elif plain and type(old) is Tensor and type(g) is Tensor and \
                            old._dtype is g._dtype and old._dtype in _SUMMED and \
                            old._data.shape == g._data.shape and not is_meta(g):
                        # the add op's NumPy sum (the same values), without its dispatch; a
                        # sum this loop made is its own (no one else sees it before the
                        # node runs) and takes the next gradient in place
                        key = (child, nr)
                        if key in sums:
                            np.add(old._data, g._data, out=old._data)
                        else:
                            buf[nr] = _new(np.add(old._data, g._data))
                            sums.add(key)
                    else:
                        buf[nr] = _add(old, g)
                d = deps[child] - 1
                deps[child] = d
                if d == 0:
                    heappush(heap, (next(ready) if type(child) is AccumulateGrad
                                    else -child._seq, child))
            outs = g = old = None   # (the buffers hold the gradients now: see accumulate)
    except Exception:
        if _anomaly["enabled"]:
            failed(node)
        raise
    finally:
        state.grad_enabled = prev
        if _trace_state.tracer is not None:
            _trace_state.tracer.loc_override = None

    if inputs is not None and not accumulate:
        return _captured(captured, allow_unused)
    return None


def _run_node(node, grads, targets, needed, hooks, captured, inputs, tracer, retain_graph,
              create_graph, accumulate):
    """run_backward's general step at a node that is not a leaf's: its hooks, what
    autograd.grad captures there, the node itself; its gradients for its edges, or _SKIP where
    it does not run (it is then not released and passes nothing on)."""
    # as PyTorch's engine: a node no gradient of an input needs is not evaluated
    # (no hooks) unless it is an input's; backward(inputs=[non_leaf]) runs that
    # node whole
    target = targets is not None and node in targets
    runs = needed is None or needed.get(node, False) or (target and accumulate)
    if not runs and not target:
        return _SKIP
    own = getattr(node, "own_hooks", False)     # (compile/output_hooks.py)
    hooked = (node._pre_hooks or node._retained) and not own and \
        hooks("a hook or retain_grad", node)
    raw = grads
    if hooked:      # (the node's own pre-hooks only when it runs, below)
        grads = run_pre_hooks(node, list(grads), False)
    if target:
        # what autograd.grad gets: after the tensor hooks, but (PyTorch's engine)
        # the gradient as it arrived when the node runs for another input
        seen = node.captures(grads, targets[node]) if own else \
            raw if runs and not accumulate else grads
        for nr, i in targets[node]:
            captured[i] = seen[nr]
            if accumulate and seen[nr] is not None and isinstance(inputs[i], Tensor) \
                    and not inputs[i]._retains_grad:    # (retain_grad wrote it above)
                # backward(inputs=[non_leaf]) accumulates into non_leaf.grad
                t, g = inputs[i], seen[nr]
                g = g if create_graph else g.detach().clone()
                t._grad = g if t._grad is None else (t._grad + g)
        if not runs:
            return _SKIP
    if hooked and -1 in (node._pre_hooks or ()):
        grads = run_node_pre_hooks(node, grads)
    live = grads[0] is not None if len(grads) == 1 else any(g is not None for g in grads)
    if live and target and tracer is not None and tracer.hooks_off and \
            node._seq < tracer.first_node:  # (compile's derivation ends at its inputs)
        live = any(g is not None for k, g in enumerate(grads)
                   if k not in {nr for nr, _ in targets[node]})
    if live:
        if tracer is not None:
            if node._seq < tracer.first_node:
                # a traced step's own backward reaching the graph that made one of
                # its inputs: its effects there are outside what a compiled call writes
                tracer.graph_break(("the results' gradients (an input kept with an "
                                    "earlier graph, not detached) reach"
                                    if tracer.hooks_off else "the backward inside "
                                    "the compiled function reaches")
                                   + " the graph that made one of its inputs")
            # backward nodes carry their forward op's line
            where = getattr(node, "_where", None)
            tracer.loc_override = where_str(where) if where else None
        outs = apply_node(node, grads, retain_graph)
        if node._post_hooks and hooks("a node hook", node):
            outs = run_post_hooks(node, outs, grads)
    else:
        outs = [None] * len(node.next_functions)
    return outs
