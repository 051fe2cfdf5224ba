"""What the tracer cannot record, as exceptions (llgrad.compile catches them)."""


class TraceError(RuntimeError):
    """What the tracer cannot record. llgrad.compile puts back what the traced run changed
    and runs the call eagerly (with a warning), or raises it with fullgraph=True."""


class ControlFlowError(TraceError):
    """What tensor-dependent control flow, converted to cond / while_loop (convert.py),
    cannot hold (a branch-dependent shape, break, a value escaping a branch): llgrad.compile
    traces the function again as it is, its tensor conditions as value guards."""
