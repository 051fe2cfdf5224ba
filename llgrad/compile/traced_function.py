"""The function a CompiledFunction traces: the user's, with its tensor-dependent control flow
rewritten into traceable form (tracer/convert.py), converted once and kept on the
CompiledFunction (`_converted`: the function and its rewritten source, shown by dumps)."""


def traced_function(cf, control_flow=True):
    """cf.fn with its tensor-dependent control flow rewritten (converted once), or cf.fn;
    control_flow=False: only its returned .item() calls (outputs, not value guards)."""
    if cf._converted is None or not control_flow:
        from ..tracer.convert import convert    # (ast and its source tools: at the first trace)
        inner = getattr(cf.fn, "_llgrad_inner", None)
        if not cf.transform:
            cf._converted = (cf.fn, None)
        elif inner is not None:         # a transform (grad, ...): convert what it wraps
            conv, source = convert(inner, control_flow)
            cf._converted = (cf.fn if conv is inner else cf.fn._llgrad_rewrap(conv), source)
        else:
            cf._converted = convert(cf.fn, control_flow)
        if not control_flow:            # (None: nothing left to fall back to)
            cf._converted = (cf._converted[0], None)
    return cf._converted[0]
