"""The tracer active on this thread, if any. The dispatcher, creation functions and
Python conversions (bool(t), t.item()) report to it; `_reset()` clears it."""
import threading
import warnings


class _State(threading.local):
    def __init__(self):
        self.tracer = None
        self.vmap_levels = 0        # llgrad.func.vmap calls active on this thread
        self.func_transforms = 0    # llgrad.func grad / vjp / jvp calls running their function
        self.func_jvps = 0          # of them, jvp's
        self.once = False           # a warning given once per process is being shown
        self.standing_in = False    # an eager run stands in for compiled code (run.StandIn)
        self.rendering = None       # a traced run's formatted values (rendered_text.py)
        self.types_read = False     # the traced code names type(): no RenderedText (a str
                                    # subclass) stands in for a value's text


state = _State()


def _reset():
    state.tracer = None
    state.vmap_levels = 0
    state.func_transforms = 0
    state.func_jvps = 0
    state.once = False
    state.standing_in = False
    state.rendering = None
    state.types_read = False
    given_once["scalar conversion"] = False


def stops_gradient(what):
    """detach(), .data or a grad-mode switch: told to a tracer that cannot follow where
    eager's gradient stops (a tensor-dependent branch's, tracer/region.py) so it refuses."""
    stop = getattr(state.tracer, "stops_gradient", None)
    if stop is not None:
        stop(what)


def grad_of(t):
    """t's .grad, read: a tracer notes that its trace depends on the .grad the call came with
    (not where the traced code cleared it first: llgrad.compile's grad-free entries)."""
    tracer = state.tracer
    if tracer is not None and id(t) not in tracer.grad_cleared:
        tracer.grad_read = True
    return t._grad


def reused():
    """Whether a trace is being made that later calls with other values reuse (compile's):
    library code checks its arguments' values with tensor ops there, value guards of the
    trace, not on the traced call's values alone."""
    return getattr(state.tracer, "reused", False)


def warn_first(message, category=UserWarning, stacklevel=1):
    """warnings.warn for a warning PyTorch gives once per process (TORCH_WARN_ONCE), its
    caller keeping the once flag: a compiled call, which gives again the warnings its traced
    run gave, does not give this one again (eager's later calls do not)."""
    state.once = True
    try:
        warnings.warn(message, category, stacklevel=stacklevel + 1)
    finally:
        state.once = False


given_once = {"scalar conversion": False}    # (TORCH_WARN_ONCE flags: once per process)


def scalar_conversion_warning(t, grad_enabled):
    """float() of a tensor requiring grad: PyTorch's warning, once per process and in grad
    mode only (LBFGS's float(loss) under no_grad is silent). stacklevel: the user's line
    two frames up (Tensor.__float__, tracer/returned.returned_number)."""
    if t.requires_grad and grad_enabled and not given_once["scalar conversion"]:
        given_once["scalar conversion"] = True
        warn_first("Converting a tensor with requires_grad=True to a scalar may lead to "
                   "unexpected behavior.\nConsider using tensor.detach() first.", UserWarning,
                   stacklevel=3)
