"""The autograd engine: runs backward nodes in dependency order, iteratively (no
recursion, so a chain of 100,000 ops is fine), accumulating gradients into leaves or
capturing them for autograd.grad.

The common graph of a compiled function (one root node whose edges all end at leaves)
takes a short path (_run_single) that gives exactly what the general one would, without
its reachability search, dependency counts and heap."""
import heapq
import itertools

import numpy as np

from . import dispatch, dtypes, grad_mode, trace_state
from . import fast_vjp  # noqa: F401  (the matrix products' NumPy VJPs: node.fast_vjps)
from .anomaly import _state as _anomaly, check_nan, failed
from .backward_hooks import (always, hooks_allowed, run_acc, run_node_pre_hooks,
                             run_post_hooks, run_pre_hooks)
from .engine_reach import _collect, _needed  # noqa: F401  (_needed: the tests')
from .meta_tensor import is_meta, meta_tensor, root_grad_to
from .node import AccumulateGrad, gradient_edge
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
_GENERAL = object()         # _run_single's answer when the graph is not its kind

UNUSED = ("The differentiated Tensor at index {} appears to not have been used in the graph. "
          "Set allow_unused=True if this is the desired behavior.")     # (PyTorch 2.13's words)


def _add(a, b):
    if a is None:
        return b
    return b + a if a.__class__ is not Tensor and a.is_sparse else a + b   # (torch's order)


def _edge(t):
    """Where t's gradient goes: (node, input number), or None; t may be such an edge itself
    (autograd.graph.GradientEdge)."""
    return (t[0], t[1]) if isinstance(t, tuple) else gradient_edge(t)


def _run_single(root, g, retain_graph, create_graph, inputs, accumulate, allow_unused):
    """run_backward for one root whose node has no hooks (nor retained grads) and whose
    edges all end at leaves (AccumulateGrad) or nowhere, with every input a leaf; _GENERAL
    for any other graph (nothing has been done then). It does what the general loop does for
    such a graph, in the same order: the node runs (if some input is behind it) and is
    released, then the leaves' nodes run in the order they become ready (the heap's), each
    once with the sum of its edges' gradients; with `inputs`, only the inputs' leaf nodes
    run, as in the general loop. (Only to capture gradients, with no leaf hooks, that order
    cannot be seen, and is not kept.)"""
    e = _edge(root)
    if e is None or g is None:
        return _GENERAL
    node, nr = e
    if type(node) is AccumulateGrad or node._pre_hooks or node._post_hooks or node._retained:
        return _GENERAL
    edges = node.next_functions
    for child, _ in edges:
        if child is not None and type(child) is not AccumulateGrad:
            return _GENERAL
    if inputs is not None:
        tnodes = []             # the input's leaf node, per input
        for t in inputs:
            te = _edge(t)
            if te is None:
                if t.requires_grad:             # a view made under no_grad: unused
                    return _GENERAL
                raise RuntimeError("One of the differentiated Tensors does not require grad")
            if type(te[0]) is not AccumulateGrad:
                return _GENERAL
            tnodes.append(te[0])
        for child, _ in edges:
            if child is not None and child in tnodes:
                needed = True
                break
        else:
            needed = False
    else:
        tnodes = None
        needed = True

    done = {}                   # leaf node -> its gradient, as the general loop captures it
    acc = None
    if needed:
        grads = [None] * node._nout
        grads[nr] = g
        state = _grad_state
        prev = state.grad_enabled
        state.grad_enabled = create_graph
        try:
            if dispatch.profiler is None:
                outs = node.apply(grads) if retain_graph else node.apply_last(grads)
            else:                       # (torch.profiler's event: dispatch.py)
                outs = dispatch.profiler.node(node, grads, retain_graph)
            if _anomaly["enabled"] and _anomaly["check_nan"]:
                check_nan(node, outs)
            if not retain_graph:
                node.release()
            if len(edges) == 1 and outs:
                child = edges[0][0]
                if child is not None:
                    done[child] = outs[0]
            else:
                for (child, _), gi in zip(edges, outs):     # each leaf's edges, summed in order
                    if child is not None:
                        if child not in done:
                            done[child] = gi
                        elif gi is not None:
                            done[child] = _add(done[child], gi)
                if len(outs) < len(edges):      # (a leaf with an edge past outs is never ready)
                    for child, _ in edges[len(outs):]:
                        done.pop(child, None)
            outs = gi = None            # (`done` holds the gradients now: see accumulate)
            run = accumulate
            if not run:                 # only capturing: is there an input's leaf hook to run?
                for acc in (tnodes if tnodes is not None else done):
                    leaf = acc._variable()
                    if leaf is not None and leaf._hooks and acc in done:
                        run = True
                        break
            if run:                     # in the general loop's order
                if len(done) > 1:       # (each ready at its last edge)
                    last = {child: i for i, (child, _) in enumerate(edges)}
                    order = sorted(done, key=last.__getitem__)
                else:
                    order = done
                for acc in order:
                    if tnodes is not None and acc not in tnodes:
                        continue        # not an input: its node does not run (no hooks)
                    ga = done[acc]
                    if ga is not None:
                        leaf = acc._variable()
                        if leaf is not None and leaf._hooks:
                            ga = done[acc] = run_pre_hooks(acc, [ga])[0]
                    if accumulate:
                        if acc._hooked:
                            done[acc], handed, ga = None, [ga], None    # (handed over)
                            run_acc(acc, handed, create_graph)
                        elif ga is not None:
                            # handed over: the engine keeps no other reference, so
                            # AccumulateGrad may keep ga itself as .grad
                            done[acc] = None
                            acc.accumulate(ga, create_graph, True)
        except Exception:
            if _anomaly["enabled"]:
                failed(acc or node)     # (acc: the leaf node whose hooks raised)
            raise
        finally:
            state.grad_enabled = prev
            if _trace_state.tracer is not None:
                _trace_state.tracer.loc_override = None

    if inputs is not None and not accumulate:
        return _captured([done.get(tn) for tn in tnodes], allow_unused)
    return None


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
    deps, nodes = _collect(root_nodes)
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
            # as PyTorch's engine: a node no gradient of an input needs is not evaluated
            # (no hooks) unless it is an input's; backward(inputs=[non_leaf]) runs that
            # node whole
            target = targets is not None and node in targets
            runs = needed is None or needed.get(node, False) or (target and accumulate)
            if not runs and not target:
                continue
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
                    continue
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
                if dispatch.profiler is None:
                    outs = node.apply(grads) if retain_graph else node.apply_last(grads)
                else:                   # (torch.profiler's event: dispatch.py)
                    outs = dispatch.profiler.node(node, grads, retain_graph)
                if _anomaly["enabled"] and _anomaly["check_nan"]:
                    check_nan(node, outs)
                if node._post_hooks and hooks("a node hook", node):
                    outs = run_post_hooks(node, outs, grads)
            else:
                outs = [None] * len(node.next_functions)
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


def _captured(grads, allow_unused):
    """The gradients autograd.grad returns (one per input), unused ones refused unless
    allowed (both engine paths)."""
    if not allow_unused:
        for i, g in enumerate(grads):
            if g is None:
                raise RuntimeError(UNUSED.format(i))
    return grads


_ONES = {}      # (shape, dtype) -> a ones array of size 1, copied for each implicit root grad


def make_root_grads(tensors, grad_tensors):
    out, edges = [], {i for i, t in enumerate(tensors) if isinstance(t, tuple)}
    for i, (t, g) in enumerate(zip(tensors, grad_tensors)):
        if isinstance(t, tuple):        # a GradientEdge: its tensor's or node's metadata
            meta = getattr(t[0], "_out_meta", None)
            m = getattr(t, "meta", None) or (meta[t[1]] if meta else (None, None))
            t = None if m[1] is None else \
                Tensor._from_array(np.broadcast_to(np.zeros((), m[1].np), m[0]))
            if t is None:
                if g is None:
                    raise RuntimeError("grad can be implicitly created for a GradientEdge "
                                       "output only where its node keeps its outputs' shapes"
                                       " (llgrad): pass grad_outputs")
                out.append(g)
                continue
        if g is None:
            d = t._data
            one = _ONES.get((d.shape, d.dtype))
            if one is None:         # (only a real scalar's ones are ever cached)
                if not t.requires_grad and i not in edges:  # (PyTorch: the engine's error)
                    out.append(Tensor._from_array(np.ones(d.shape, dtype=d.dtype)))
                    continue
                if d.size != 1:
                    raise RuntimeError("grad can be implicitly created only for scalar "
                                       "outputs")
                if not t._dtype.is_floating_point:
                    raise RuntimeError("grad can be implicitly created only for real scalar "
                                       f"outputs but got {t._dtype!r}")
                one = _ONES[(d.shape, d.dtype)] = np.ones(d.shape, dtype=d.dtype)
            g = Tensor._from_array(one.copy()) if not is_meta(t) else meta_tensor(d.shape, t._dtype)
        elif not isinstance(g, Tensor):     # (PyTorch's error, word for word)
            raise TypeError("gradients can be either Tensors or None, but got "
                            f"{type(g).__name__}")
        elif g._data.shape != t._data.shape:
            raise RuntimeError(f"Mismatch in shape: grad_output[{i}] has a shape of "
                               f"llgrad.Size({list(g._data.shape)}) and output[{i}] has a shape "
                               f"of llgrad.Size({list(t._data.shape)}).")
        out.append(g if i in edges or is_meta(g) is is_meta(t) else root_grad_to(t, g, i))
    return out
