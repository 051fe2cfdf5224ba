"""The `perf` log channel (LLGRAD_LOG=perf): one line per compiled call, its time split
into guards and dispatch, launch, kernels, outputs and autograd. A sink of instrument.py's
events, active only while the channel is on."""
from . import log
from .instrument import activate, call_name, deactivate, sinks


_LABELS = (("call", "guards and dispatch"), ("runner", "outputs and autograd"),
           ("launch", "launch"), ("kernel", "kernels"), ("interpreted", "interpreted"),
           ("compile", "trace/compile"), ("eager", "eager ops"),
           ("eager backward", "eager backward"))


class _PerfLog:
    level = "calls"
    eager = False

    def event(self, ev):
        pass

    def top(self, ev, cats):
        if ev.cat in ("eager", "eager backward"):
            return              # (eager ops are timed for profiles, not logged per op)
        if ev.cat == "call":
            what = call_name(ev.meta)
        elif ev.cat == "runner":
            what = ev.name.partition(":")[0]
        else:
            what = f"{ev.name} ({ev.cat})"
        parts = [f"{label} {cats[c] / 1e3:.1f}" for c, label in _LABELS if cats.get(c)]
        log.emit("perf", "%s: %.1f us = %s", what, ev.dur / 1e3, " + ".join(parts) or "-")


_perf = _PerfLog()


def set_perf_logging(on):
    if on and _perf not in sinks:
        activate(_perf)
    elif not on and _perf in sinks:
        deactivate(_perf)


log.perf_hook = set_perf_logging
if log._perf_wanted:                # (LLGRAD_LOG=perf read before this module was loaded)
    set_perf_logging(True)
