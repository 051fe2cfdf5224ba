"""The warning a compiled function gives once when it reaches its recompile limit: later
calls with new guard values run eagerly."""
import warnings

from . import log
from .readable import limit_change


def warn_limit(cf, guards, args=(), kwargs=None):
    if "recompile limit" in cf._warned:
        return
    cf._warned.add("recompile limit")
    if log.enabled("graph_breaks"):
        log.emit("graph_breaks", "%s: recompile limit (%d) reached: calls with new guard "
                 "values run eagerly (call at %s)", getattr(cf.fn, "__name__", "fn"),
                 cf.recompile_limit, log.user_line(3))
    changed = limit_change(cf, guards, args, kwargs)
    warnings.warn(f"llgrad.compile({getattr(cf.fn, '__name__', 'fn')}): recompile limit "
                  f"({cf.recompile_limit}) reached; the guard that changed: "
                  f"{changed[0]}. From now on, running eagerly for new guard values.",
                  RuntimeWarning, stacklevel=3)
