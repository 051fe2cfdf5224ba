"""LLGRAD_LOG: what compile did, through the `logging` module (as TORCH_LOGS does).

    LLGRAD_LOG=recompiles,graph_breaks python train.py
    LLGRAD_LOG=all python train.py          # every channel
    llgrad.set_logs("guards,compile")       # the same from Python (None or "" turns all off)

Channels, each the logger `llgrad.<channel>` (children of `logging.getLogger("llgrad")`):

    recompiles    each re-trace: the guard that failed (`x.shape[0] == 4 (now 8)`), and
                  the user's line that made the call
    graph_breaks  each call that runs eagerly and why (the construct and the user's line)
    guards        the guard list of each new entry, in readable form
    compile       trace, partition and LLVM time per graph; kernel cache hits and misses
    perf          per call: the time split into guard check, launch and kernels

All are off by default and cost nothing then: the messages of the first four are made on
slow paths only (a trace, a kernel build, an eager fallback), and `perf` instruments the
call path (instrument.py) only while it is on. Messages go out at INFO level; with
LLGRAD_LOG set (or set_logs called) a handler writing to stderr is attached to the
"llgrad" logger unless it already has one, and records do not propagate further up. Turned
on through `logging` directly (`logging.getLogger("llgrad.recompiles").setLevel(
logging.INFO)`, or the "llgrad" logger's level for all), they go wherever that
configuration sends them (a root logger at INFO turns none on; `perf` needs set_logs or
LLGRAD_LOG, which instrument the calls). `logging` itself is imported only when a log is
configured: `import llgrad` does not load it.

The one line llgrad prints without being asked: a compile (trace and kernel builds of one
entry) that took over a second says so on stderr when it ends (`progress`), unless
LLGRAD_QUIET=1 or LLGRAD_LOG is set (then the `compile` channel says it, if chosen)."""
from __future__ import annotations
import os
import re
import sys
import threading
import time
import warnings
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable

CHANNELS = ("recompiles", "graph_breaks", "guards", "compile", "perf")
PROGRESS_SECONDS = 1.0
INFO = 20                       # (logging.INFO: `logging` is imported when first needed)

_loggers = {}
_handler = None
_on = False                     # whether set_logs turned a channel on
perf_hook = None        # perf_log.set_perf_logging (set when perf_log.py is imported)
_perf_wanted = False


def logger(name="llgrad"):
    """logging.getLogger(name), importing `logging` on first use (not at `import llgrad`:
    a program that never logs does not pay for it)."""
    lg = _loggers.get(name)
    if lg is None:
        import logging
        for n in ("llgrad", *(f"llgrad.{c}" for c in CHANNELS)):
            _loggers[n] = logging.getLogger(n)
        lg = _loggers.get(name) or _loggers.setdefault(name, logging.getLogger(name))
    return lg


def ready():
    """llgrad's loggers made now if the program uses `logging` (a compiled call about to be
    traced: made lazily inside it, they would be a change of the `logging` state a user's
    logger reaches, and the traced run not kept)."""
    if not _loggers and "logging" in sys.modules:
        logger()


def _formatter():
    import logging

    class Format(logging.Formatter):
        def format(self, record):
            channel = record.name.rpartition(".")[2] if record.name != "llgrad" else "llgrad"
            return f"[llgrad:{channel}] {record.getMessage()}"
    return Format()


def parse(spec):
    """The channel names in an LLGRAD_LOG value ("all" or "+all": every one); an unknown
    name raises ValueError naming the channels."""
    if not spec:
        return set()
    names = {s.strip().lstrip("+") for s in spec.replace(";", ",").split(",") if s.strip()}
    if "all" in names:
        return set(CHANNELS)
    bad = sorted(names - set(CHANNELS))
    if bad:
        raise ValueError(f"LLGRAD_LOG: unknown channel(s) {', '.join(map(repr, bad))} "
                         f"(channels: {', '.join(CHANNELS)}, or all)")
    return names


def set_logs(spec: str | Iterable[str] | None = None, **channels: bool) -> None:
    """Turn channels on: set_logs("recompiles,guards"), set_logs(perf=True), or
    set_logs(None) / set_logs("") for none. Attaches a stderr handler to the "llgrad"
    logger if it has none."""
    global _handler, _perf_wanted, _on
    import logging
    on = parse(spec) if isinstance(spec, str) else set(spec or ())
    for name, flag in channels.items():
        if name not in CHANNELS:
            raise ValueError(f"set_logs: unknown channel {name!r} (channels: "
                             f"{', '.join(CHANNELS)})")
        (on.add if flag else on.discard)(name)
    for c in CHANNELS:
        logger(f"llgrad.{c}").setLevel(logging.INFO if c in on else logging.NOTSET)
    root = logger()
    if on and not root.handlers:
        _handler = logging.StreamHandler(sys.stderr)
        _handler.setFormatter(_formatter())
        root.addHandler(_handler)
        root.propagate = False
    elif not on and _handler is not None:       # (all off: as before set_logs)
        root.removeHandler(_handler)
        root.propagate = True
        _handler = None
    _on = bool(on)
    _perf_wanted = "perf" in on
    if perf_hook is not None:
        perf_hook(_perf_wanted)
    return sorted(on)


def enabled(channel):
    """Whether a channel's messages go anywhere (slow paths only: this asks `logging`).
    A channel is on when its logger, or the "llgrad" logger, has a level of INFO or lower
    set on itself (LLGRAD_LOG and set_logs set it): a root logger at INFO does not turn
    llgrad's channels on."""
    if not _on and "logging" not in sys.modules:
        return False            # (no one configured logging: nothing can be on)
    level = logger(f"llgrad.{channel}").level or logger().level
    return bool(level) and level <= INFO


def emit(channel, message, *args):
    logger(f"llgrad.{channel}").info(message, *args)


def _configure_from_env():
    """LLGRAD_LOG, read when llgrad is imported (a bad channel name warns)."""
    spec = os.environ.get("LLGRAD_LOG")
    if spec:
        try:
            set_logs(spec)
        except ValueError as e:
            warnings.warn(str(e), UserWarning, stacklevel=3)


def quiet():
    """Whether the progress line stays unprinted: LLGRAD_QUIET=1, or LLGRAD_LOG chosen."""
    return os.environ.get("LLGRAD_QUIET", "") not in ("", "0") or \
        bool(os.environ.get("LLGRAD_LOG"))


# ---- the call site ---------------------------------------------------------------------------
_PKG = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def user_line(depth=1):
    """file:line of the innermost frame outside llgrad (the user's call), or '?'."""
    f = sys._getframe(depth)
    while f is not None and os.path.abspath(f.f_code.co_filename).startswith(_PKG):
        f = f.f_back
    return f"{f.f_code.co_filename}:{f.f_lineno}" if f is not None else "?"


def warn_user(message, category=UserWarning):
    """warnings.warn(message) attributed to the innermost frame outside llgrad (the user's
    call of the compiled function), the message naming that line if it names none of its
    own (a fallback decided after the run: a draw from another generator, inputs that
    share memory)."""
    f, level = sys._getframe(0), 1
    while f is not None and os.path.abspath(f.f_code.co_filename).startswith(_PKG):
        f, level = f.f_back, level + 1
    if f is not None and not _HAS_LINE.search(message):
        message += f" (the call at {short_loc(f.f_code.co_filename)}:{f.f_lineno})"
    warnings.warn(message, category, stacklevel=level if f is not None else 1)


_HAS_LINE = re.compile(r"\.py:\d+")


def short_loc(loc):
    """A source location without its directories (file.py:12)."""
    loc = str(loc or "")
    head, sep, line = loc.rpartition(":")
    return f"{os.path.basename(head)}{sep}{line}" if sep else os.path.basename(loc)


# ---- compile times and the progress line ------------------------------------------------------
def count_ops(graph):
    return len(graph.nodes) if graph is not None else 0


def traced(entry, seconds):
    """A trace became an entry: log its times (compile channel)."""
    t = entry.timings
    t["trace_total"] = seconds
    if enabled("compile"):
        parts = ", ".join(f"{k} {t[k] * 1e3:.1f} ms" for k in ("trace", "partition", "verify")
                          if k in t)
        what = f"forward {count_ops(entry.forward)} ops" + (
            f", backward {count_ops(entry.backward)} ops, {_saved_bytes(entry):,} bytes saved"
            if entry.backward is not None else
            (", a step: its own backward inside" if entry.step else ""))
        emit("compile", "traced %s (%s) in %.1f ms: %s", entry.name, what, seconds * 1e3, parts)
    _maybe_progress(entry)


def built(entry, which, seconds, how):
    """A graph of entry became runnable (kernel built, found in a cache, or an interpreter
    set up): log it (compile channel); print the progress line if the entry is complete."""
    t = entry.timings
    t[which] = seconds
    t[which + "_how"] = how
    t[which + "_end"] = end = time.perf_counter()
    t[which + "_start"] = end - seconds
    if enabled("compile"):
        emit("compile", "%s %s graph (%d ops): %s in %.1f ms", entry.name, which,
             count_ops(getattr(entry, which)), how, seconds * 1e3)
    _maybe_progress(entry)


def _saved_bytes(entry):
    return sum(getattr(s, "nbytes", 0) or 0 for s in entry.saved if s.input_index is None) \
        if entry.saved else 0


def build_seconds(timings):
    """The wall time from the first of an entry's builds starting to the last ending (the
    forward and backward build side by side: background.py), 0.0 before any."""
    ends = [timings[k] for k in ("forward_end", "backward_end") if k in timings]
    starts = [timings[k] for k in ("forward_start", "backward_start") if k in timings]
    return max(ends) - min(starts) if ends else 0.0


_progress_lock = threading.Lock()


def _maybe_progress(entry):
    t = entry.timings
    with _progress_lock:        # (the forward's and the backward's builds end on two threads)
        if t.get("progress_done") or "trace_total" not in t or "forward" not in t or \
                (entry.backward is not None and "backward" not in t):
            return
        t["progress_done"] = True
    total = t["trace_total"] + build_seconds(t)
    if total < PROGRESS_SECONDS or quiet():
        return
    hows = {t.get("forward_how", ""), t.get("backward_how", "")} - {""}
    cached = "; loaded from the kernel cache" if hows and all("disk cache" in h or "memory" in h
                                                             for h in hows) \
        else "; cached" if any("LLVM" in h for h in hows) and _disk_cache_on() else ""
    ops = f"forward {count_ops(entry.forward)} ops" + (
        f", backward {count_ops(entry.backward)} ops" if entry.backward is not None else "")
    sys.stderr.write(f"llgrad: compiled {entry.name} ({ops}) in {total:.1f} s{cached}\n")
    sys.stderr.flush()


def _disk_cache_on():
    return os.environ.get("LLGRAD_CACHE_DIR", "") != "0"


class Timer:
    """seconds = Timer(); ...; seconds() -> elapsed (perf_counter)."""
    __slots__ = ("t0",)

    def __init__(self):
        self.t0 = time.perf_counter()

    def __call__(self):
        return time.perf_counter() - self.t0
