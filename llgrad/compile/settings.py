"""llgrad's global settings that a function can change as it runs (`set_grad_enabled(False)`
without a `with`, set_default_dtype, set_printoptions, set_num_threads, anomaly mode, ...).
A compiled call does not run the function's Python, so it would not change them: a traced
run that changed one is not kept as compiled code, and calls like it run eagerly."""
import sys

from ..ir.promotion import default_float
from ..runtime import anomaly, formatting, functions_settings, grad_mode

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
