"""The autograd engine's short path (_run_single) for the common graph of a compiled function:
one root node whose edges all end at leaves, run exactly as the general loop (engine.py)
would run it, without its reachability search, dependency counts and heap; and the small
helpers both paths share (a tensor's gradient edge, the sum of two gradients, the gradients
autograd.grad returns)."""
from . import dispatch, grad_mode, trace_state
from .anomaly import _state as _anomaly, check_nan, failed
from .backward_hooks import run_acc, run_pre_hooks
from .node import AccumulateGrad, gradient_edge
from .tensor import Tensor

_grad_state = grad_mode.state
_trace_state = trace_state.state
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
            outs = apply_node(node, grads, retain_graph)
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


def _captured(grads, allow_unused):
    """The gradients autograd.grad returns (one per input), unused ones refused unless
    allowed (both engine paths)."""
    if not allow_unused:
        for i, g in enumerate(grads):
            if g is None:
                raise RuntimeError(UNUSED.format(i))
    return grads


def apply_node(node, grads, retain_graph):
    """node's gradients for its edges (its saved values let go of unless retain_graph), as
    torch.profiler's event where one records (dispatch.py), checked for a nan in anomaly
    mode: the one way every engine loop runs a node."""
    if dispatch.profiler is None:
        outs = node.apply(grads) if retain_graph else node.apply_last(grads)
    else:
        outs = dispatch.profiler.node(node, grads, retain_graph)
    if _anomaly["enabled"] and _anomaly["check_nan"]:
        check_nan(node, outs)
    return outs
