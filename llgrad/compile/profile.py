"""`with llgrad.profile() as p: ...` then `print(p.table())`: where the time of compiled
calls goes, kernel group by kernel group, beside the eager ops by name (what
torch.profiler's key_averages().table() shows); `p.export_chrome_trace(path)` writes the
events for chrome://tracing or Perfetto.

Rows (each a self time: an event's time minus the events inside it, so the rows add up to
the time spent in compiled calls, backward runs and eager ops inside the block):

    kernel    one native kernel group: its ops and the user's lines (`g3 tanh+mul
              (model.py:12)`), bytes it reads and writes, and GB/s (GFLOP/s for a group
              with a matrix product)
    launch    a kernel launch's own time: input checks, output allocation, pointer array
    runner    a compiled call's result tensors and autograd node; a backward's feeds
    call      a compiled call's guard check and dispatch (and whatever the call did not
              spend in the rows above)
    profiler  the profiler's own time between kernel groups (timed one at a time)
    compile   traces and kernel builds that happened inside the block
    eager     eager ops by name (their NumPy work; `: record grad_fn` the autograd node)
    eager backward   eager autograd nodes by name (MulBackward0, ...)

The groups are timed by running each group's own native function in turn (groupkernel.py):
the first profile of a kernel builds those (one LLVM compile, cached like the kernel), before
the block's timing starts for kernels built already."""
from __future__ import annotations
import os
import threading

from . import instrument, perf_log  # noqa: F401 (perf_log: LLGRAD_LOG=perf needs its sink)

class Row:
    __slots__ = ("name", "kind", "calls", "total_ns", "bytes", "flops")

    def __init__(self, name, kind):
        self.name, self.kind, self.calls, self.total_ns = name, kind, 0, 0
        self.bytes = self.flops = 0

    @property
    def mean_ns(self):
        return self.total_ns / self.calls if self.calls else 0.0

    @property
    def rate(self):
        """'12.3 GFLOP/s' or '4.56 GB/s' (kernel groups), else ''."""
        if self.kind != "kernel" or not self.total_ns:
            return ""
        if self.flops:
            return f"{self.flops * self.calls / self.total_ns:.2f} GFLOP/s"
        if self.bytes:
            return f"{self.bytes * self.calls / self.total_ns:.2f} GB/s"
        return ""

    def __repr__(self):
        return f"<Row {self.kind} {self.name!r}: {self.calls} calls, {self.total_ns / 1e3:.1f} us>"


class profile:
    """A profiler (also a decorator-free context manager: `with llgrad.profile() as p`).

    groups=False times each kernel as a whole (no extra build); eager=False leaves eager
    ops untimed."""

    def __init__(self, groups: bool = True, eager: bool = True) -> None:
        self.level = "groups" if groups else "calls"
        self.eager = eager
        self.events = []
        self.top_ns = 0             # the time of the outermost events (sum)
        self.wall_ns = None
        self._t0 = None
        self._lock = threading.Lock()

    # ---- the instrument's sink ----------------------------------------------------------------
    def event(self, ev):
        """Record one event (the instrument calls this)."""
        self.events.append(ev)

    def events_extend(self, events):
        """Record several events (the instrument calls this)."""
        self.events.extend(events)

    def top(self, ev, cats):
        """Count the time of an outermost event (the instrument calls this)."""
        self.top_ns += ev.dur

    # ---- the block ----------------------------------------------------------------------------
    def __enter__(self):
        self.event_cost_ns = instrument.event_cost_ns()
        instrument.activate(self)
        self._t0 = instrument.ns()
        return self

    def __exit__(self, *exc):
        self.wall_ns = instrument.ns() - self._t0
        instrument.deactivate(self)
        return False

    def start(self) -> profile:
        """Start profiling without a with block (as torch.profiler's start())."""
        return self.__enter__()

    def stop(self) -> None:
        """Stop profiling started by start()."""
        self.__exit__(None, None, None)

    # ---- results ------------------------------------------------------------------------------
    def key_averages(self) -> list[Row]:
        """[Row] by name, the largest total (self) time first."""
        rows = {}
        for ev in self.events:
            name = ev.name
            if ev.cat == "eager":
                name = f"eager {name}"
            key = (ev.cat, name)
            row = rows.get(key)
            if row is None:
                row = rows[key] = Row(name, ev.cat)
                meta = ev.meta
                if ev.cat == "kernel" and meta is not None:
                    row.bytes, row.flops = meta.bytes, meta.flops
            row.calls += 1
            row.total_ns += ev.self_ns
        return sorted(rows.values(), key=lambda r: -r.total_ns)

    def total_ns(self) -> int:
        """The sum of all self times: the time spent inside profiled events."""
        return sum(ev.self_ns for ev in self.events)

    def kernel_rows(self) -> list[Row]:
        """The rows of native kernel groups, the largest total time first."""
        return [r for r in self.key_averages() if r.kind == "kernel"]

    def table(self, row_limit: int | None = None, sort_by: str = "total") -> str:
        """The rows as a text table (as torch.profiler's key_averages().table()):
        sort_by 'total' (default), 'calls' or 'name'; row_limit rows at most."""
        rows = self.key_averages()
        if sort_by == "calls":
            rows.sort(key=lambda r: -r.calls)
        elif sort_by == "name":
            rows.sort(key=lambda r: r.name)
        total = sum(r.total_ns for r in rows) or 1
        shown = rows if row_limit is None else rows[:row_limit]
        width = min(max([len(r.name) for r in shown] + [20]), 72)
        head = (f"{'name':<{width}}  {'kind':<14} {'calls':>6} {'total':>10} {'mean':>10} "
                f"{'%':>6} {'bytes/call':>11}  rate")
        lines = [head, "-" * len(head)]
        for r in shown:
            name = r.name if len(r.name) <= width else r.name[:width - 3] + "..."
            lines.append(f"{name:<{width}}  {r.kind:<14} {r.calls:>6} {_t(r.total_ns):>10} "
                         f"{_t(r.mean_ns):>10} {100 * r.total_ns / total:>5.1f}% "
                         f"{_b(r.bytes) if r.kind == 'kernel' else '':>11}  {r.rate}")
        if row_limit is not None and len(rows) > row_limit:
            lines.append(f"... {len(rows) - row_limit} more rows")
        lines.append("-" * len(head))
        wall = f"; wall time of the block {_t(self.wall_ns)}" if self.wall_ns else ""
        lines.append(f"self times add up to {_t(total if rows else 0)} over {len(self.events)} "
                     f"events{wall}")
        cost = getattr(self, "event_cost_ns", None)
        if cost:
            lines.append(f"(timing an event costs ~{_t(cost)}, counted in the self time of "
                         "the event around it; `profiler:` rows are the profiler's own)")
        return "\n".join(lines)

    def __str__(self):
        return self.table()

    def export_chrome_trace(self, path: str) -> None:
        """The events as Chrome trace JSON ('X' events; open in ui.perfetto.dev or
        chrome://tracing). Returns path."""
        import json
        origin = min((ev.start for ev in self.events), default=0)
        pid = os.getpid()
        events = []
        for ev in self.events:
            args = {"self_us": ev.self_ns / 1e3}
            if ev.cat == "kernel" and ev.meta is not None:
                args.update(bytes=ev.meta.bytes, flops=ev.meta.flops)
            events.append({"name": ev.name, "cat": ev.cat, "ph": "X",
                           "ts": (ev.start - origin) / 1e3, "dur": ev.dur / 1e3,
                           "pid": pid, "tid": ev.tid, "args": args})
        events.sort(key=lambda e: (e["ts"], -e["dur"]))
        with open(path, "w") as f:
            json.dump({"traceEvents": events, "displayTimeUnit": "ms"}, f)
        return path


def _t(ns):
    if ns is None:
        return "-"
    if ns >= 1e9:
        return f"{ns / 1e9:.3f} s"
    if ns >= 1e6:
        return f"{ns / 1e6:.3f} ms"
    return f"{ns / 1e3:.1f} us"


def _b(n):
    if not n:
        return "-"
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n} B"
