"""Backward hooks as the engine runs them, in PyTorch's order and with its checks: tensor
hooks, retained grads and node pre-hooks before a node runs, post hooks after it, and an
AccumulateGrad's own hooks around the accumulation."""
import types
import weakref

from . import trace_state
from .node import AccumulateGrad, Node
from .tensor import Tensor


def hook_result(hook, r, before, fill_none=False):
    """A node hook's non-None result as a list replacing the gradients `before`, checked as
    PyTorch checks it (fill_none: a gradient may replace None, where llgrad hands None for
    a value PyTorch computed: a custom Function's gradient for an input without an edge)."""
    if not isinstance(r, tuple):
        raise TypeError(f"expected tuple, but hook returned '{type(r).__name__}'")
    if len(r) != len(before):
        raise RuntimeError(f"hook '{getattr(hook, '__name__', '<unknown>')}' has returned an "
                           f"incorrect number of values (got {len(r)}, but expected "
                           f"{len(before)})")
    for v, old in zip(r, before):
        if v is not None and not isinstance(v, Tensor):
            raise TypeError(f"expected Variable, but hook returned '{type(v).__name__}'")
        if v is not None and old is None and not fill_none:
            raise RuntimeError("can't replace a None gradient with a non-None value")
        if v is not None and old is not None:   # (a size or dtype of its own: PyTorch's error)
            _checked(hook, old, v)
    return list(r)


def _node_call(node, *grads):
    """node(*grad_outputs): the gradients for its next functions, as calling a PyTorch
    Node does (one gradient alone, not in a tuple)."""
    if len(grads) != node._nout:        # (PyTorch's check)
        raise TypeError(f"expected {node._nout} arguments, got {len(grads)} instead")
    out = tuple(node.apply(list(grads)))
    return out[0] if len(out) == 1 else out


def _metadata(node):
    """A dict of the user's own kept with the node, as torch's Node.metadata."""
    d = _metadata_of.get(node)
    if d is None:
        d = _metadata_of[node] = {}
    return d


_metadata_of = weakref.WeakKeyDictionary()
Node.__call__ = _node_call
Node.metadata = property(_metadata)


def run_node_pre_hooks(node, grads):
    """The node's own pre-hooks (register_prehook): fn(grad_outputs) -> tuple or None."""
    for hook in tuple(node._pre_hooks.get(-1, {}).values()):
        r = hook(tuple(grads))
        if r is not None:
            grads = hook_result(hook, r, grads)
    return grads


def run_post_hooks(node, outs, grads):
    """The node's post hooks (register_hook): fn(grad_inputs, grad_outputs) -> tuple or None,
    a tuple replacing grad_inputs."""
    for hook in tuple(node._post_hooks.values()):
        r = hook(tuple(outs), tuple(grads))
        if r is not None:
            outs = hook_result(hook, r, outs, getattr(node, "_op", None) is None)
    return outs


def run_acc(node, grads, create_graph):
    """An AccumulateGrad node that has hooks of its own, after its leaf's tensor hooks, in
    PyTorch's order: pre-hooks (which may replace the gradient), the accumulation, the leaf's
    post-accumulate-grad hooks, post hooks (given () and the gradient after the pre-hooks).
    As in PyTorch they all run also when no gradient (None) reached the node. grads: a
    one-gradient list the caller hands over (holding no other reference): as PyTorch's, a
    gradient nothing else refers to becomes .grad itself, so a post hook's gradient is the
    .grad a post-accumulate-grad hook changed."""
    if node._pre_hooks:
        grads = run_node_pre_hooks(node, grads)
    if grads[0] is not None:
        node.accumulate(grads[0], create_graph, True)
    hooks = node._post_acc_hooks
    if hooks:
        leaf = node.variable
        if leaf is not None:
            for hook in tuple(hooks.values()):
                r = hook(leaf)
                # PyTorch lets a hook return the leaf itself (`lambda p: p.add_(...)`, its
                # docstring's example) and raises its two errors, word for word, otherwise
                if r is not None and r is not leaf:
                    if not isinstance(r, Tensor):
                        raise TypeError("expected Variable, but hook returned "
                                        f"'{type(r).__name__}'")
                    raise RuntimeError("Tensor post accumulate grad hooks should return None.")
    if node._post_hooks:
        run_post_hooks(node, (), grads)


def _checked(hook, g, r):
    """A tensor hook's result, checked as PyTorch does: a tensor of g's dtype and size."""
    name = getattr(hook, "__name__", type(hook).__name__)
    if not hasattr(r, "_dtype"):
        raise TypeError(f"expected Variable, but hook returned '{type(r).__name__}'")
    if r._dtype is not g._dtype:
        raise RuntimeError(f"hook '{name}' has changed the type of value (was "
                           f"llgrad.{g._dtype._tensor_type} got llgrad.{r._dtype._tensor_type})")
    if r._data.shape != g._data.shape:
        raise RuntimeError(f"hook '{name}' has changed the size of value")
    return r


def run_pre_hooks(node, grads, node_hooks=True):
    """The hooks that run before node: its outputs' tensor hooks, retained gradients, and
    (node_hooks) its own pre-hooks; grads is changed in place and returned. PyTorch runs
    the last only when the node itself runs: autograd.grad of a result whose node need not
    run captures the gradient after the first two."""
    if isinstance(node, AccumulateGrad):    # the leaf's tensor hooks (the node's own: run_acc)
        leaf = node.variable
        for hook in list(leaf._hooks.values()) if leaf is not None and leaf._hooks else ():
            if grads[0] is not None:
                r = hook(grads[0])
                if r is not None:
                    grads[0] = _checked(hook, grads[0], r)
        return grads
    hooks = node._pre_hooks
    if hooks:
        for nr, fns in hooks.items():
            if nr == -1:
                continue
            for hook in tuple(fns.values()):
                # (as PyTorch, also given None: an output of the node no gradient reached)
                r = hook(grads[nr])
                if r is not None:
                    if grads[nr] is None:
                        raise RuntimeError("can't replace a None gradient with a non-None value")
                    grads[nr] = _checked(hook, grads[nr], r)
    retained = node._retained       # (PyTorch: tensor hooks, retain_grad, then node pre-hooks)
    if retained:
        for nr, ref in retained.items():
            t = ref()
            if t is not None and grads[nr] is not None:
                g = grads[nr]
                if t._grad is None:
                    # (PyTorch's retain_grad hook keeps a row-major copy; a sparse one as is)
                    fmt = None if g.__class__ is not Tensor and g.is_sparse else \
                        "contiguous_format"
                    t._grad = g.detach().clone(fmt)
                else:
                    t._grad = (t._grad + g).detach()
    if hooks and -1 in hooks and node_hooks:
        grads = run_node_pre_hooks(node, grads)
    return grads


class UnguardedLeafHooks(Exception):
    """A step traced by compile reached an input leaf's hooks its guard walk did not walk:
    compile walks them from then on and traces the call again (compiled_function.py)."""


def leaf_hooks(t):
    """Leaf t's tensor hooks and post-accumulate-grad hooks (each a tuple of functions); None
    when its AccumulateGrad node has hooks of a node's own, or a hook is not a plain function
    (a callable object, a bound method: state compile's guard walk does not follow), which
    are never traced."""
    acc = t._acc
    if acc is not None and (acc._pre_hooks or acc._post_hooks):
        return None
    hooks = (tuple(t._hooks.values()) if t._hooks else (),
             tuple(acc._post_acc_hooks.values()) if acc is not None and acc._post_acc_hooks
             else ())
    return hooks if all(type(f) is types.FunctionType for f in hooks[0] + hooks[1]) else None


def always(what, node=None):
    return True


def hooks_allowed(what, node=None):
    """While tracing: False (skip) in compile's own differentiation; in the user's own
    backward, True for the hooks of a node the traced run made (registered by it, traced
    as its code is: hook_handle.py) and for the tensor and post-accumulate-grad hooks of an
    input leaf that compile guards (tracer.leaf_hooks: what they read is walked as the
    function's own reads, guards.py), else the trace breaks (tracer.graph_break raises)."""
    tracer = trace_state.state.tracer
    if tracer.hooks_off:
        return False
    leaf = node.variable if isinstance(node, AccumulateGrad) else None
    # (a leaf's AccumulateGrad is made on its first use: an input's can be newer than the
    # trace, its hooks the caller's all the same)
    if node is not None and node._seq >= tracer.first_node and \
            (leaf is None or not _traced_input(tracer, leaf)):
        return True
    hooks = leaf_hooks(leaf) if leaf is not None else None
    if hooks is not None:
        if tracer.leaf_hooks is None and tracer.reused:
            raise UnguardedLeafHooks(what)      # (compile collects the call again with them)
        if tracer.leaf_hooks and tracer.leaf_hooks.get(id(leaf)) == hooks:
            return True
    tracer.graph_break(f"{what} runs in a backward inside the compiled function (its "
                       "Python effects could not be replayed)")


def _traced_input(tracer, t):
    """Whether t is an input of the trace tracer is part of (not a tensor it made)."""
    while getattr(tracer, "parent", None) is not None:     # (a region's: its trace's inputs)
        tracer = tracer.parent
    return tracer._sid(t) in tracer.inputs
