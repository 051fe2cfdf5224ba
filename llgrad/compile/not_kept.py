"""Traced runs that are not kept: a run that changed Python state a compiled call cannot
replay (side_effects.py, appended_lists.py, attr_writes.py) gave eager's result and left no
compiled code, so the next call traces (runs eagerly) again. Once, that is a retry (a list
the run grew is marked, an optimiser's first step made its state: the next trace is kept);
two such runs in a row are a fallback, which warns once, naming the reason and the user's
line, as a graph break does (else the step runs eagerly, silently, until the recompile
limit, whose warning a short run never reaches)."""
from . import log
from .recompile_limit import name

WARNED = "traced runs not kept"     # (its key in the function's warned reasons: once)


def note(cf, reason, before, one_off=False):
    """Note on compiled function cf a traced run not kept (reason: what it changed, as
    text); before: cf's reason for the previous trace's (None: that one was kept, or none
    ran); one_off: a run no later trace repeats (an optimiser's first step)."""
    streak = 0 if one_off else (cf._unkept_streak if before is not None else 0) + 1
    cf._not_kept, cf._unkept_streak = reason, streak
    if log.enabled("recompiles"):
        log.emit("recompiles", "%s: the traced run is not kept as compiled code: %s "
                 "(which a compiled call cannot replay); the next call traces again",
                 name(cf.fn), reason)
    if streak < 2 or WARNED in cf._warned:
        return
    text = (f"{reason}, which a compiled call cannot replay: no traced run is kept, so "
            f"each call traces again and runs eagerly")
    cf._break(text)
    cf._warned.add(WARNED)
    log.warn_user(f"llgrad.compile({name(cf.fn)}): running eagerly: {text}")
