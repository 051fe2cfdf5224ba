"""llgrad's global settings that a function can change as it runs (`set_grad_enabled(False)`
without a `with`, set_default_dtype, set_printoptions, set_num_threads, anomaly mode, ...).
A compiled call does not run the function's Python, so it would not change them: a traced
run that changed one is not kept as compiled code, and calls like it run eagerly."""
import sys

from ..ir.promotion import default_float, set_default_float
from ..runtime import (anomaly, formatting, functions_settings, global_module_hooks,
                       global_optimizer_hooks, grad_mode)

_NAMES = ("grad mode", "inference mode", "default dtype", "print options", "thread count",
          "anomaly mode", "deterministic algorithms", "float32 matmul precision")


def settings():
    """The settings now, as a tuple (compared before and after a traced run)."""
    st, s = grad_mode.state, functions_settings._Settings
    return (st.grad_enabled, st.inference, default_float(),
            (formatting.PRECISION, formatting.THRESHOLD, formatting.EDGEITEMS,
             formatting.LINEWIDTH, formatting.SCI_MODE),
            _threads(), tuple(anomaly._state.values()),
            (s.deterministic, s.deterministic_warn_only), s.matmul_precision)


def saved_settings():
    """What restore_settings puts back: settings(), the grad mode set inside
    inference_mode (is_grad_enabled reports it there) and nn's and optim's global hooks (a
    traced run that breaks is run again eagerly: from the caller's settings and hooks, not
    those the traced run left, or `set_grad_enabled(False)` or a hook registered by it
    counts twice)."""
    return settings(), grad_mode.state.inference_grad, [(d, dict(d)) for d in (
        *global_module_hooks._ALL, global_module_hooks.backward_kind,
        global_optimizer_hooks.step_pre, global_optimizer_hooks.step_post)]


def restore_settings(saved):
    """Put back what saved_settings() saved. (The thread count is left: only
    set_num_threads sets it.)"""
    (grad, inference, dtype, printing, _, anomalous, determ, precision), inf_grad, hooks = saved
    swap_grad_mode((grad, inference, inf_grad))
    set_default_float(dtype)
    (formatting.PRECISION, formatting.THRESHOLD, formatting.EDGEITEMS, formatting.LINEWIDTH,
     formatting.SCI_MODE) = printing
    anomaly._state.update(zip(anomaly._state, anomalous))
    s = functions_settings._Settings
    (s.deterministic, s.deterministic_warn_only), s.matmul_precision = determ, precision
    for d, items in hooks:
        if d != items or list(d) != list(items):
            d.clear()
            d.update(items)


def grad_mode_now():
    """The grad mode: (grad_enabled, inference, inference_grad)."""
    return grad_mode.state.grad_enabled, grad_mode.state.inference, grad_mode.state.inference_grad


def swap_grad_mode(mode):
    """Set the grad mode (grad_enabled, inference, inference_grad) to `mode` (None: leave
    it) -> the one before, or None if it was `mode`: a traced run that leaves
    `set_grad_enabled(False)` on runs eagerly (above), and what the trace does after the run
    reads the call's grad mode, the run's put back after it (the traced run is eager's)."""
    now = grad_mode_now()
    if mode is None or now == mode:
        return None
    st = grad_mode.state
    st.grad_enabled, st.inference, st.inference_grad = mode
    return now


def _threads():
    """The native thread count, or None while nothing has loaded it (loading it would load
    LLVM, which llgrad does only to build code; set_num_threads loads it)."""
    count = sys.modules.get("llgrad.codegen.native.threadcount")
    read = getattr(count, "get_num_threads", None)  # (None: a background build imports it)
    return None if read is None else read()


def changed_setting(before):
    """The name of the first setting that differs from `before` (settings()), or None. (The
    thread count going from not loaded to its default is no change: a build, perhaps one in
    the background, loaded it.)"""
    now = settings()
    return next((n for n, a, b in zip(_NAMES, before, now) if a != b and not (
        n == "thread count" and a is None and b == _default_threads())), None)


def _default_threads():
    count = sys.modules.get("llgrad.codegen.native.threadcount")
    return getattr(count, "DEFAULT", None)
