"""The autograd engine: runs backward nodes in dependency order, iteratively (no
recursion, so a chain of 100,000 ops is fine), accumulating gradients into leaves or
capturing them for autograd.grad."""
import heapq

import numpy as np

from . import grad_mode, trace_state
from .node import AccumulateGrad, gradient_edge


def _add(a, b):
    if a is None:
        return b
    return a + b


def _collect(root_nodes):
    """Count, for every node reachable from the roots, the edges that point at it."""
    deps = {}
    stack = list(root_nodes)
    seen = set(root_nodes)
    while stack:
        node = stack.pop()
        for child, _ in node.next_functions:
            if child is None:
                continue
            deps[child] = deps.get(child, 0) + 1
            if child not in seen:
                seen.add(child)
                stack.append(child)
    return deps, seen


def _needed(nodes, targets):
    """Nodes that must run so that gradients reach a target: those with a path to one."""
    needed = {}
    for start in nodes:
        if start in needed:
            continue
        stack = [(start, iter(start.next_functions))]
        on_path = {start}
        while stack:
            node, it = stack[-1]
            advanced = False
            for child, _ in it:
                if child is None:
                    continue
                if child not in needed and child not in on_path:
                    on_path.add(child)
                    stack.append((child, iter(child.next_functions)))
                    advanced = True
                    break
            if advanced:
                continue
            stack.pop()
            needed[node] = any(c is not None and (c in targets or needed.get(c, False))
                               for c, _ in node.next_functions)
    return needed


def _run_pre_hooks(node, grads):
    if isinstance(node, AccumulateGrad):
        leaf = node.variable
        for hook in (leaf._hooks or ()) if leaf is not None else ():
            if grads[0] is not None:
                r = hook(grads[0])
                if r is not None:
                    grads[0] = r
        return grads
    hooks = node._pre_hooks
    if hooks:
        for nr, fns in hooks.items():
            if nr == -1:
                continue
            for hook in list(fns):
                if grads[nr] is not None:
                    r = hook(grads[nr])
                    if r is not None:
                        grads[nr] = r
        for hook in list(hooks.get(-1, ())):
            r = hook(tuple(grads))
            if r is not None:
                grads = list(r)
    retained = node._retained
    if retained:
        for nr, ref in retained.items():
            t = ref()
            if t is not None and grads[nr] is not None:
                g = grads[nr]
                t._grad = g.detach().clone() if t._grad is None else (t._grad + g).detach()
    return grads


def run_backward(roots, root_grads, retain_graph=False, create_graph=False, inputs=None,
                 accumulate=True, allow_unused=False):
    """Backpropagate root_grads from roots. With accumulate, add into the leaves' .grad
    (only those in `inputs` when given); otherwise return the gradients of `inputs`."""
    root_edges = []
    for i, (t, g) in enumerate(zip(roots, root_grads)):
        e = gradient_edge(t)
        if e is None:
            raise RuntimeError(f"element {i} of tensors does not require grad and does not "
                               "have a grad_fn")
        root_edges.append((e, g))
    targets = None
    if inputs is not None:
        targets = {}
        for i, t in enumerate(inputs):
            e = gradient_edge(t)
            if e is None:
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
    heap = [(-n._seq, n) for n in root_nodes if deps.get(n, 0) == 0]
    heapq.heapify(heap)

    prev = grad_mode.state.grad_enabled
    grad_mode.state.grad_enabled = create_graph
    try:
        while heap:
            _, node = heapq.heappop(heap)
            grads = buffers.pop(node, None) or [None] * node._nout
            grads = _run_pre_hooks(node, grads)
            is_target = targets is not None and node in targets
            if is_target:
                for nr, i in targets[node]:
                    captured[i] = grads[nr]
                    if accumulate and grads[nr] is not None and \
                            not isinstance(node, AccumulateGrad):
                        # backward(inputs=[non_leaf]) accumulates into non_leaf.grad
                        t, g = inputs[i], grads[nr]
                        g = g if create_graph else g.detach().clone()
                        t._grad = g if t._grad is None else (t._grad + g)
            if isinstance(node, AccumulateGrad):
                if accumulate and grads[0] is not None and (targets is None or is_target):
                    node.accumulate(grads[0], create_graph)
                continue
            if needed is not None and not needed.get(node, False):
                continue
            if any(g is not None for g in grads):
                tracer = trace_state.state.tracer
                if tracer is not None:      # backward nodes carry their forward op's line
                    where = getattr(node, "_where", None)
                    tracer.loc_override = str(where) if where else None
                outs = node.apply(grads)
                if node._post_hooks:
                    for hook in node._post_hooks:
                        hook(tuple(outs), tuple(grads))
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
                    buf[nr] = _add(buf[nr], g)
                d = deps[child] - 1
                deps[child] = d
                if d == 0:
                    heapq.heappush(heap, (-child._seq, child))
    finally:
        grad_mode.state.grad_enabled = prev
        if trace_state.state.tracer is not None:
            trace_state.state.tracer.loc_override = None

    if inputs is not None and not accumulate:
        for i, g in enumerate(captured):
            if g is None and not allow_unused:
                raise RuntimeError("One of the differentiated Tensors appears to not have "
                                   "been used in the graph. Set allow_unused=True if this is "
                                   "the desired behavior.")
        return captured
    return None


def make_root_grads(tensors, grad_tensors):
    from .tensor import Tensor
    out = []
    for i, (t, g) in enumerate(zip(tensors, grad_tensors)):
        if g is None:
            if t._data.size != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs")
            if not t._dtype.is_floating_point:
                raise RuntimeError("grad can be implicitly created only for real scalar outputs "
                                   f"but got {t._dtype!r}")
            g = Tensor._from_array(np.ones(t._data.shape, dtype=t._data.dtype))
        elif not isinstance(g, Tensor):
            g = Tensor._from_array(np.asarray(g, dtype=t._data.dtype))
        elif g._data.shape != t._data.shape:
            raise RuntimeError(f"Mismatch in shape: grad_output[{i}] has a shape of "
                               f"llgrad.Size({list(g._data.shape)}) and output[{i}] has a shape "
                               f"of llgrad.Size({list(t._data.shape)}).")
        out.append(g)
    return out
