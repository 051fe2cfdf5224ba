"""Tensor hooks and retain_grad() on the results of a compiled call, run by their
CompiledFunctionBackward node itself (the engine leaves them to it).

A result that another result is computed from (the features beside the logits Grad-CAM
hooks, `y` beside `y.sum()`) gets in eager the gradient flowing into it from the others as
well as its own; the compiled backward computes that part inside its kernel, where no hook
sees it. When such a result has hooks and another result is given a gradient, the node
replays the forward eagerly (backward_node._exact) with the hooks on the replayed result,
so they see, and may change, the whole gradient as eager's do."""
from ..ir.graph import Value
from ..runtime import grad_mode, trace_state
from ..runtime.autograd_api import grad as autograd_grad
from ..runtime.backward_hooks import hooks_allowed, run_node_pre_hooks, run_pre_hooks
from ..runtime.tensor import Tensor
from ..tracer.control_ops import replay


def hooked(node):
    """The output numbers of node's results with tensor hooks or retain_grad()."""
    out = set()
    if node._pre_hooks:
        out.update(nr for nr, fns in node._pre_hooks.items() if nr != -1 and fns)
    if node._retained:
        out.update(nr for nr, ref in node._retained.items() if ref() is not None)
    return out


def run_hooks(node, grads, layout):
    """grads after the hooks as the engine runs them, or None where a hooked result is one
    another result given a gradient is computed from: then _exact runs them (replayed)."""
    if trace_state.state.tracer is not None and not hooks_allowed("a hook or retain_grad"):
        return grads        # (compile's own differentiation runs no hooks, as the engine)
    nrs = hooked(node)
    inner = [nr for nr in nrs if any(g is not None and _deps(node, layout)[k] >> nr & 1
                                     for k, g in enumerate(grads))]
    if not inner:
        return run_pre_hooks(node, list(grads)) if nrs or -1 in (node._pre_hooks or {}) \
            else grads
    if node._pre_hooks and -1 in node._pre_hooks:
        run_node_pre_hooks(node, list(grads))
    return None


def captures(node, grads, pairs):
    """The gradients autograd.grad and backward(inputs=) take of node's results (pairs:
    (output number, input index)), each of which gets the gradients flowing into it from
    the other results computed from it, as eager's does (autograd.grad(logits.sum(),
    features)); the compiled backward sums those inside its kernel, where the engine sees
    none. grads: the results' own gradients; the result: those to capture."""
    deps = _deps(node, node._layout)
    inner = [nr for nr, _ in pairs if any(g is not None and deps[k] >> nr & 1
                                          for k, g in enumerate(grads))]
    if not inner:
        return grads
    entry, create = node.entry, grad_mode.state.grad_enabled
    inputs = node._replayed_inputs()
    with grad_mode.enable_grad():
        for i in entry.diff_inputs:
            t = inputs[i]
            inputs[i] = t.view_as(t) if create else t.detach().requires_grad_()
        if node._rng_state is not None:
            inputs.append(Tensor._from_array(node._rng_state))
        env = replay(entry.forward, inputs)
    values = [env[entry.forward.outputs[i]] for i in entry.diff_outputs]
    inner = [nr for nr in inner if values[nr].requires_grad]
    given = [(values[k], g) for k, g in enumerate(grads) if g is not None]
    # (a result given a gradient of its own is among the outputs: what comes back for it
    # is the sum, as autograd.grad gives for a tensor that is output and input)
    got = autograd_grad([o for o, _ in given], [values[nr] for nr in inner],
                        [g for _, g in given], retain_graph=True, create_graph=create,
                        allow_unused=True) if inner else ()
    out = list(grads)
    for nr, g in zip(inner, got):
        if g is not None:
            out[nr] = g if create else g.detach()
    return out


def replayed_hook(node, nr):
    """A hook for the replayed result number nr: node's hooks of that result in order, then
    its retain_grad()."""
    def hook(g):
        out = run_pre_hooks(_Only(node, nr), [None] * nr + [g])
        return out[nr]
    return hook


class _Only:
    """node's tensor hooks and retained gradient of result nr alone (run_pre_hooks reads
    these two attributes)."""
    __slots__ = ("_pre_hooks", "_retained")

    def __init__(self, node, nr):
        hooks = node._pre_hooks or {}
        retained = node._retained or {}
        self._pre_hooks = {nr: hooks[nr]} if nr in hooks else None
        self._retained = {nr: retained[nr]} if nr in retained else None


def _deps(node, layout):
    """Per output number k, the mask of the output numbers its value is computed from."""
    if layout.deps is None:
        entry = node.entry
        fwd = entry.forward
        values = [fwd.outputs[i] for i in entry.diff_outputs]
        index = {}
        for j, v in enumerate(values):
            index.setdefault(id(v), []).append(j)
        deps = []
        for v in values:
            mask, seen, stack = 0, set(), [x for x in (v.node.inputs if v.node else ())
                                         if isinstance(x, Value)]
            while stack:
                x = stack.pop()
                if id(x) in seen:
                    continue
                seen.add(id(x))
                for j in index.get(id(x), ()):
                    mask |= 1 << j
                if x.node is not None:
                    stack.extend(y for y in x.node.inputs if isinstance(y, Value))
            deps.append(mask)
        layout.deps = deps
    return layout.deps
