"""torch.autograd.profiler_util's event classes: FunctionEvent (one event, its CPU parent and
children, self time), FunctionEventAvg (events averaged by key) and EventList (a list of
either, with key_averages, table and export_chrome_trace). Times are in microseconds, as
PyTorch's; memory in bytes."""
import enum
import json
import os
from collections import defaultdict

from ._table import build_table, format_time


class DeviceType(enum.Enum):
    CPU = 0
    CUDA = 1


class Interval:
    __slots__ = ("start", "end")

    def __init__(self, start, end):
        self.start, self.end = start, end

    def elapsed_us(self):
        return self.end - self.start


class _Times:
    """The *_str properties of the times (as PyTorch's FormattedTimesMixin)."""
    cpu_time_str = property(lambda self: format_time(self.cpu_time))
    cpu_time_total_str = property(lambda self: format_time(self.cpu_time_total))
    self_cpu_time_total_str = property(lambda self: format_time(self.self_cpu_time_total))
    device_time_str = property(lambda self: format_time(self.device_time))
    device_time_total_str = property(lambda self: format_time(self.device_time_total))
    self_device_time_total_str = property(
        lambda self: format_time(self.self_device_time_total))

    @property
    def cpu_time(self):
        return 0.0 if self.count == 0 else self.cpu_time_total / self.count

    @property
    def device_time(self):
        return 0.0

    device_time_total = self_device_time_total = cuda_time = cuda_time_total = 0.0
    self_cuda_time_total = device_memory_usage = self_device_memory_usage = 0
    cuda_memory_usage = self_cuda_memory_usage = 0
    flops = 0
    node_id = -1
    is_async = is_remote = is_legacy = False
    device_type = DeviceType.CPU
    overload_name = ""
    scope = 0
    use_device = None


class FunctionEvent(_Times):
    """One profiled event (an op, an autograd node, a record_function block, a compiled call
    or kernel). time_range is in us from the profile's start; cpu_children and cpu_parent
    are the events directly inside it and around it on its thread."""

    def __init__(self, id, name, thread, start_us, end_us, input_shapes=None, stack=None,
                 cpu_memory_usage=0, is_user_annotation=False, category="cpu_op",
                 trace_name=None):
        self.id, self.name, self.thread = id, name, thread
        self.trace_name = trace_name or name
        self.time_range = Interval(start_us, end_us)
        self.input_shapes = input_shapes
        self.stack = stack if stack is not None else []
        self.cpu_memory_usage = cpu_memory_usage
        self.is_user_annotation = is_user_annotation
        self.category = category
        self.cpu_children = []
        self.cpu_parent = None
        self.count = 1
        self.kernels = []
        self.sequence_nr = -1
        self.fwd_thread = 0

    key = property(lambda self: self.name)

    def append_cpu_child(self, child):
        self.cpu_children.append(child)

    def set_cpu_parent(self, parent):
        self.cpu_parent = parent

    @property
    def cpu_time_total(self):
        return self.time_range.elapsed_us()

    @property
    def self_cpu_time_total(self):
        return self.cpu_time_total - sum(c.cpu_time_total for c in self.cpu_children)

    @property
    def self_cpu_memory_usage(self):
        return self.cpu_memory_usage - sum(c.cpu_memory_usage for c in self.cpu_children)

    def __repr__(self):
        return (f"<FunctionEvent id={self.id} name={self.name} cpu_time={self.cpu_time_str} "
                f"start_us={self.time_range.start:.3f} end_us={self.time_range.end:.3f} "
                f"cpu_children={[c.id for c in self.cpu_children]} "
                f"input_shapes={self.input_shapes} cpu_memory_usage={self.cpu_memory_usage}>")


class FunctionEventAvg(_Times):
    """Events of one key, summed (add) and averaged (cpu_time)."""

    def __init__(self):
        self.key = None
        self.count = 0
        self.cpu_time_total = self.self_cpu_time_total = 0.0
        self.cpu_memory_usage = self.self_cpu_memory_usage = 0
        self.input_shapes = None
        self.stack = None
        self.cpu_parent = None
        self.cpu_children = None
        self.is_user_annotation = False

    def add(self, other):
        if self.key is None:
            self.key = other.key
            self.cpu_parent = other.cpu_parent
            self.input_shapes = other.input_shapes
            self.stack = other.stack
            self.is_user_annotation = other.is_user_annotation
        if not isinstance(other, (FunctionEvent, FunctionEventAvg)):
            raise AssertionError("Expected other to be a FunctionEvent or FunctionEventAvg")
        if other.key != self.key:
            raise AssertionError(f"Expected keys to match, but got {other.key} vs {self.key}")
        self.cpu_time_total += other.cpu_time_total
        self.self_cpu_time_total += other.self_cpu_time_total
        self.cpu_memory_usage += other.cpu_memory_usage
        self.self_cpu_memory_usage += other.self_cpu_memory_usage
        self.count += other.count
        return self

    def __iadd__(self, other):
        return self.add(other)

    def __repr__(self):
        return (f"<FunctionEventAvg key={self.key} self_cpu_time={self.self_cpu_time_total_str} "
                f"cpu_time={self.cpu_time_str} input_shapes={self.input_shapes} "
                f"cpu_memory_usage={self.cpu_memory_usage}>")


class EventList(list):
    """A list of FunctionEvents (or of FunctionEventAvgs, from key_averages)."""

    def __init__(self, *args, use_device=None, profile_memory=False, with_flops=False,
                 **kwargs):
        super().__init__(*args, **kwargs)
        self._use_device = use_device
        self._profile_memory = profile_memory
        self._with_flops = with_flops

    @property
    def self_cpu_time_total(self):
        return sum(e.self_cpu_time_total for e in self)

    def table(self, sort_by=None, row_limit=100, max_src_column_width=75,
              max_name_column_width=55, max_shapes_column_width=80, header=None,
              top_level_events_only=False, time_unit=None):
        """The events as PyTorch's text table (sort_by an attribute: 'cpu_time_total',
        'self_cpu_time_total', 'count', 'cpu_memory_usage', ...)."""
        return build_table(self, sort_by=sort_by, header=header, row_limit=row_limit,
                           max_src_column_width=max_src_column_width,
                           max_name_column_width=max_name_column_width,
                           max_shapes_column_width=max_shapes_column_width,
                           profile_memory=self._profile_memory,
                           top_level_events_only=top_level_events_only, time_unit=time_unit)

    def key_averages(self, group_by_input_shapes=False, group_by_stack_n=0,
                     group_by_overload_name=False):
        """The events averaged by name (and input shapes, and the innermost n stack frames,
        if asked): an EventList of FunctionEventAvg, in the order keys first occur."""
        stats = defaultdict(FunctionEventAvg)
        for evt in self:
            key = [str(evt.key), str(evt.node_id), str(evt.device_type), str(evt.is_legacy),
                   str(evt.is_user_annotation)]
            if group_by_input_shapes:
                key.append(str(evt.input_shapes))
            if group_by_stack_n > 0:
                key += list(evt.stack or [])[:group_by_stack_n]
            stats[tuple(key)].add(evt)
        out = EventList(stats.values(), use_device=self._use_device,
                        profile_memory=self._profile_memory, with_flops=self._with_flops)
        for evt in out:
            evt.stack = list(evt.stack or [])[:group_by_stack_n]
            if not group_by_input_shapes:
                evt.input_shapes = ""
        return out

    def total_average(self):
        """All events summed into one FunctionEventAvg (key 'Total')."""
        total = FunctionEventAvg()
        for evt in self:
            total.cpu_time_total += evt.cpu_time_total
            total.self_cpu_time_total += evt.self_cpu_time_total
            total.cpu_memory_usage += evt.cpu_memory_usage
            total.self_cpu_memory_usage += evt.self_cpu_memory_usage
            total.count += evt.count
        total.key = "Total"
        return total

    def export_chrome_trace(self, path):
        """The events as Chrome trace JSON ('X' events in us; chrome://tracing, Perfetto)."""
        pid = os.getpid()
        trace = [{"ph": "M", "name": "process_name", "ts": 0, "pid": pid, "tid": 0,
                  "args": {"name": "python"}}]
        for tid in sorted({e.thread for e in self}):
            trace.append({"ph": "M", "name": "thread_name", "ts": 0, "pid": pid, "tid": tid,
                          "args": {"name": f"thread {tid} (python)"}})
        for i, e in enumerate(sorted(self, key=lambda e: (e.time_range.start,
                                                          -e.time_range.end))):
            args = {"External id": e.id, "Ev Idx": i}
            if e.input_shapes:
                args["Input Dims"] = e.input_shapes
            if e.stack:
                args["Call stack"] = ";".join(e.stack)
            trace.append({"ph": "X", "cat": e.category, "name": e.trace_name, "pid": pid,
                          "tid": e.thread, "ts": e.time_range.start,
                          "dur": e.time_range.elapsed_us(), "args": args})
        with open(path, "w") as f:
            json.dump({"schemaVersion": 1, "traceEvents": trace, "displayTimeUnit": "ms",
                       "traceName": str(path)}, f)
        return path


def build_events(session, profile_memory=False, with_flops=False):
    """The session's raw events as an EventList of FunctionEvents, ordered by start, each
    with its CPU parent and children (by time nesting on its thread)."""
    raw = sorted(session.events, key=lambda r: (r.start, -r.end))
    origin = session.t0 if session.t0 is not None else (raw[0].start if raw else 0)
    events = EventList(use_device=None, profile_memory=profile_memory, with_flops=with_flops)
    open_by_thread = {}
    for i, r in enumerate(raw):
        # (a profile's step blocks: one key, 'ProfilerStep*', each its own trace name)
        name = "ProfilerStep*" if r.name.startswith("ProfilerStep#") else r.name
        ev = FunctionEvent(i + 1, name, r.tid, (r.start - origin) / 1e3,
                           (r.end - origin) / 1e3, input_shapes=r.shapes, stack=r.stack,
                           cpu_memory_usage=r.mem, is_user_annotation=r.cat == "user_annotation",
                           category=r.cat, trace_name=r.name)
        stack = open_by_thread.setdefault(r.tid, [])
        while stack and stack[-1][1] <= r.start:
            stack.pop()
        if stack and r.end <= stack[-1][1]:
            parent = stack[-1][0]
            ev.set_cpu_parent(parent)
            parent.append_cpu_child(ev)
        stack.append((ev, r.end))
        events.append(ev)
    for ev in reversed(events):     # (memory as PyTorch counts it: the children's included)
        if ev.cpu_parent is not None:
            ev.cpu_parent.cpu_memory_usage += ev.cpu_memory_usage
    return events
