"""x.unsqueeze_(d), squeeze_, t_, transpose_ on an input x of a compiled function
(runtime/inplace_views.py): the trace reads x through the view from then on, and a compiled
call gives x that same view of its memory after the call, as the eager run leaves it (the
name-generation tutorial's `target_line_tensor.unsqueeze_(-1)`).

Only an input itself that requires no grad is replayed so (a view of one, or an input with
a history, runs eagerly: TraceError). The call's write-back (a value written into x, and the
version counter the in-place ops moved) goes to x once it has its new shape."""
from ..runtime import grad_mode
from ..tracer.errors import TraceError


def input_reshapes(entry, tracer, tensors):
    """entry.input_reshapes [(input position, view, args, kwargs)] of the traced run's
    in-place view ops on inputs, in order."""
    where = {id(t): k for k, (_, t) in enumerate(tensors)}
    entry.input_reshapes = []
    for t, view, args, kwargs in tracer.input_reshapes:
        k = where.get(id(t))
        if k is None:
            raise TraceError(f"{view.__name__}_() changes the shape of a view of an input of "
                             "the compiled function, which a compiled call cannot replay")
        if tracer.memory_written(t._storage, k):    # (a write-back in which shape)
            raise TraceError(f"{view.__name__}_() on an input of the compiled function that "
                             "it also writes, which a compiled call cannot replay")
        entry.input_reshapes.append((k, view, args, kwargs))


def replay_reshapes(entry, tensors):
    """Before a compiled call's write-back: each input the run viewed in place gets the
    view's shape and strides over its own memory. -> the positions given a new shape."""
    with grad_mode.no_grad():
        for k, view, args, kwargs in entry.input_reshapes:
            t = tensors[k]
            t._data = view(t, *args, **kwargs)._data
    return {k for k, _, _, _ in entry.input_reshapes}


def reshapes_taken_back(entry, before, after, tensors):
    """The guard items after the traced run with the layouts of the inputs entry views in
    place taken back to theirs before it (the entry replays that change; side_effects.py):
    a tensor's item is (dtype, shape, strides, requires_grad, first path, ...)."""
    paths = {tensors[k][0] for k, _, _, _ in entry.input_reshapes if k < len(tensors)}
    if not paths:
        return after
    was = dict(before)
    out = []
    for name, v in after:
        b = was.get(name)
        if type(v) is tuple and len(v) == 7 and v[4] in paths and type(b) is tuple and \
                len(b) == 7 and b[0] == v[0] and b[3:] == v[3:]:
            v = b
        out.append((name, v))
    return out
