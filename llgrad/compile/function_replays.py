"""A compiled graph that holds a custom autograd.Function, where its backward node would
replay the forward through the dispatcher.

The traced forward holds the ops the Function's forward ran, not the Function: a replay
differentiated by the engine gets those ops' derivatives (a straight-through estimator's
round: zero), not the Function's own backward. The compiled backward graph is right (it was
traced from eager's, the Function's backward included), so what needs only first-order
gradients replays it instead (CompiledFunctionBackward._differentiable: the forward and
backward graphs through the dispatcher, under the caller's grad mode). What needs the
replayed forward itself, a gradient graph (create_graph) or a hook on an output other
outputs are computed from, raises instead of giving another number than eager's."""
import numpy as np

from ..runtime import grad_mode


def checked(replay):
    """A CompiledFunctionBackward replay method (_exact, _differentiable) that goes
    through `instead` when the node's entry traced a custom autograd.Function."""
    def run(node, grads, *rest):
        if node.entry.functions:
            return instead(node, grads, *rest)
        return replay(node, grads, *rest)
    run.__wrapped__ = replay
    run.__doc__ = replay.__doc__
    return run


def instead(node, grads, hooked=()):
    named = sorted({f.__name__ for f in node.entry.functions})
    names = ("s " if len(named) > 1 else " ") + ", ".join(named)
    if hooked or grad_mode.state.grad_enabled:
        why = "a hook on a result other results are computed from" if hooked else \
            "a gradient that is differentiable itself (create_graph=True)"
        raise RuntimeError(
            f"llgrad.compile: {why} needs the compiled call's forward replayed, and a replay "
            f"loses the backward of the custom autograd.Function{names} that it ran; call "
            "the function uncompiled for this (llgrad.compiler.disable)")
    outs = type(node)._differentiable.__wrapped__(node, grads)
    if any(g is None for g in grads) and not all(
            o is None or _finite(o) for o in outs):
        raise RuntimeError(
            f"llgrad.compile: the gradient of some results alone made a non-finite number, "
            f"which only a replay of the forward could tell from eager's, and a replay loses "
            f"the backward of the custom autograd.Function{names}; call the function "
            "uncompiled for this (llgrad.compiler.disable)")
    return outs


def _finite(t):
    data = t._data
    return type(data) is not np.ndarray or bool(np.isfinite(data).all())
