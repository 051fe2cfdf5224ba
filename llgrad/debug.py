"""Debugging compiled code: `llgrad.debug.compare(fn, *args)` finds the first node of a
compiled graph whose values differ from the reference (llgrad/compile/compare.py), and
LLGRAD_CHECK=1 (or `llgrad.debug.set_check(True)`) does that before every call of every
compiled function that has an entry for the call: slow, for hunting a wrong result. A
mismatch warns (RuntimeWarning, once per function and node); LLGRAD_CHECK=raise raises
llgrad.debug.MismatchError instead."""
import os
import threading
import warnings

from .compile.compare import Mismatch, Report, compare  # noqa: F401
from .compile.compiled_function import CompiledFunction


class MismatchError(RuntimeError):
    """Raised by LLGRAD_CHECK=raise (or set_check('raise')) when a compiled call differs
    from the reference; .report is the Report."""
    def __init__(self, report):
        super().__init__(str(report))
        self.report = report


_ORIG_CALL = None
_mode = None
_inside = threading.local()
_warned = set()


def _checked_call(self, *args, **kwargs):
    if not getattr(_inside, "on", False) and self._resolved.traces:
        _inside.on = True
        try:
            report = compare(self, *args, trace=False, **kwargs)
        except Exception as e:          # (a check that cannot run says so, once)
            report = None
            key = (id(self), type(e).__name__)
            if key not in _warned:
                _warned.add(key)
                warnings.warn(f"LLGRAD_CHECK: could not compare "
                              f"{getattr(self.fn, '__name__', 'fn')}: {type(e).__name__}: {e}",
                              RuntimeWarning, stacklevel=2)
        finally:
            _inside.on = False
        if report is not None and not report.ok:
            if _mode == "raise":
                raise MismatchError(report)
            key = (id(self), report.mismatch.line)
            if key not in _warned:
                _warned.add(key)
                warnings.warn(str(report), RuntimeWarning, stacklevel=2)
    return _ORIG_CALL(self, *args, **kwargs)


def set_check(mode: bool | str = True) -> None:
    """Turn the check of every compiled call on (True, or "raise") or off (False)."""
    global _ORIG_CALL, _mode
    on = bool(mode) and mode not in ("0", "false", "False")
    if on and _ORIG_CALL is None:
        _ORIG_CALL = CompiledFunction.__call__
        CompiledFunction.__call__ = _checked_call
    elif not on and _ORIG_CALL is not None:
        CompiledFunction.__call__ = _ORIG_CALL
        _ORIG_CALL = None
    _mode = "raise" if mode == "raise" else ("warn" if on else None)


if os.environ.get("LLGRAD_CHECK", "") not in ("", "0"):
    set_check(os.environ["LLGRAD_CHECK"])
