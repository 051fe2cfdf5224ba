"""The warning a compiled function gives once when it reaches its recompile limit: later
calls with new guard values run eagerly."""
from . import log
from .readable import limit_change


def warn_limit(cf, guards, args=(), kwargs=None):
    if "recompile limit" in cf._warned:
        return
    cf._warned.add("recompile limit")
    if log.enabled("graph_breaks"):
        log.emit("graph_breaks", "%s: recompile limit (%d) reached: calls with new guard "
                 "values run eagerly (call at %s)", name(cf.fn),
                 cf.recompile_limit, log.user_line(3))
    changed = limit_change(cf, guards, args, kwargs)
    # (attributed to the user's call, however many llgrad frames (a compiled module, a
    # compiled forward reached through Module.__call__) lie between)
    log.warn_user(f"llgrad.compile({name(cf.fn)}): recompile limit ({cf.recompile_limit}) "
                  f"reached; the guard that changed: {changed[0]}. From now on, running "
                  f"eagerly for new guard values.", RuntimeWarning)


def name(fn):
    """fn's name, or its class's for a compiled module (an object with no __name__)."""
    return getattr(fn, "__name__", None) or type(fn).__name__
