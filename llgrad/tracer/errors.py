"""What the tracer cannot record, as exceptions (llgrad.compile catches them)."""
from ..runtime.saved_tensor import user_location


class TraceError(RuntimeError):
    """What the tracer cannot record. llgrad.compile puts back what the traced run changed
    and runs the call eagerly (with a warning), or raises it with fullgraph=True."""


class ControlFlowError(TraceError):
    """What tensor-dependent control flow, converted to cond / while_loop (convert.py),
    cannot hold (a branch-dependent shape, break, a value escaping a branch): llgrad.compile
    traces the function again as it is, its tensor conditions as value guards."""


def later_error(e):
    """The TraceError for a RuntimeError that tracing a function's backward raised, which
    eager raises only when the caller runs backward (so the call runs eagerly, and its
    results carry that graph), or None for the tracer's own (raised as they are)."""
    if isinstance(e, TraceError):
        return None
    text = str(e)
    if "backward through the graph a second time" in text:
        # a result whose graph a backward / autograd.grad inside the function freed
        # (autograd.grad(g.sum(), x) after g = grad(..., create_graph=True))
        return TraceError("a result that requires grad has a graph that a backward in the "
                          "function freed")
    if "modified by an inplace operation" in text:
        return TraceError("a tensor the backward needs is modified in place later in the "
                          f"function ({text.split('Hint: ')[-1].rstrip('.')})")
    if text.startswith("derivative for aten::") and text.endswith("is not implemented"):
        return TraceError(f"a result's backward goes through an op with no derivative ({text})")
    # any other: a derivative rule that refuses these inputs (lu_factor of a non-square
    # matrix, qr with mode='r', elu_ with a negative alpha), which eager raises only in the
    # backward too (its forward, the traced run, has succeeded)
    return TraceError(f"a result's backward raises {type(e).__name__}: "
                      f"{text.splitlines()[0] if text else ''}")


def note_branch_alias(tracer, tensors, what):
    """A branch of `what` gives a tensor from outside it (`y = x`, `y = z[0]`) as a result:
    eager's result then shares that memory, the compiled `cond`'s is a copy, so a later
    in-place write to either (check_branch_alias) cannot be traced that way."""
    for t in tensors:
        tracer.branch_aliases[id(t._storage.base)] = (t._storage.base, what)


def check_branch_alias(tracer, t, opname):
    hit = tracer.branch_aliases.get(id(t._storage.base))
    if hit is not None and hit[0] is t._storage.base:
        raise ControlFlowError(f"{user_location()}: in-place {opname} on a tensor that a branch "
                               f"of {hit[1]} gives unchanged or as a view: eager's result "
                               "shares its memory, a traced branch's result is a copy")
