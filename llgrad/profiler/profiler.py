"""torch.profiler.profile on llgrad: a context manager (or start()/stop(), with step() and a
schedule) that records eager ops by PyTorch's aten names, autograd nodes, record_function
blocks, and compiled calls with their kernels (_record.py), as FunctionEvents (events.py).

Only the CPU is profiled (llgrad has no devices); asking for CUDA warns, as PyTorch on a
build without CUDA. Memory (profile_memory=True) is the bytes of the tensors an op returns
(frees are not counted); with_stack gives the user's frames of each event."""
import enum
import os
import platform
import time
import warnings

from . import _record
from .events import EventList, build_events


class ProfilerActivity(enum.Enum):
    CPU = 0
    XPU = 1
    CUDA = 2
    HPU = 3
    MTIA = 4
    PrivateUse1 = 5

    def __int__(self):
        return self.value

    __index__ = __int__


class ProfilerAction(enum.Enum):
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3
    DEVICE_STOPPED = 4


def supported_activities():
    """The activities this build can profile: {ProfilerActivity.CPU}."""
    return {ProfilerActivity.CPU}


def kineto_available():
    return True


def schedule(*, wait, warmup, active, repeat=0, skip_first=0, skip_first_wait=0):
    """PyTorch's schedule: skip `skip_first` steps, then cycles of `wait` steps (NONE),
    `warmup` (WARMUP), `active` (RECORD, the last RECORD_AND_SAVE), `repeat` times (0: no
    end)."""
    def schedule_fn(step):
        if step < 0:
            raise AssertionError(f"Step must be non-negative. Got {step}.")
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        if skip_first_wait != 0:
            step += wait
        num_steps = wait + warmup + active
        if repeat > 0 and step / num_steps >= repeat:
            return ProfilerAction.NONE
        mod_step = step % num_steps
        if mod_step < wait:
            return ProfilerAction.NONE
        if mod_step < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if mod_step < num_steps - 1 else \
            ProfilerAction.RECORD_AND_SAVE

    if wait < 0 or warmup < 0 or active <= 0 or repeat < 0 or skip_first < 0:
        raise AssertionError(
            f"Invalid profiler schedule arguments. Got wait={wait} (need >= 0), warmup={warmup} "
            f"(need >= 0), active={active} (need > 0), repeat={repeat} (need >= 0), "
            f"skip_first={skip_first} (need >= 0).")
    if warmup == 0:
        warnings.warn("Profiler won't be using warmup, this can skew profiler results",
                      stacklevel=2)
    return schedule_fn


def _default_schedule_fn(_):
    return ProfilerAction.RECORD


def tensorboard_trace_handler(dir_name, worker_name=None, use_gzip=False,
                              use_python_export=False):
    """An on_trace_ready handler writing each trace to
    dir_name/<worker_name>.<time ns>.pt.trace.json (worker_name: '<hostname>_<pid>')."""
    def handler_fn(prof):
        nonlocal worker_name
        if not os.path.isdir(dir_name):
            try:
                os.makedirs(dir_name, exist_ok=True)
            except Exception as e:
                raise RuntimeError("Can't create directory: " + dir_name) from e
        if not worker_name:
            worker_name = f"{platform.node()}_{os.getpid()}"
        file_name = f"{worker_name}.{time.time_ns()}.pt.trace.json"
        if use_gzip:
            file_name += ".gz"
        prof.export_chrome_trace(os.path.join(dir_name, file_name))
    return handler_fn


class _KinetoProfile:
    """What a profile records and reads back (torch.profiler's base class)."""

    def __init__(self, *, activities=None, record_shapes=False, profile_memory=False,
                 with_stack=False, with_flops=False, with_modules=False,
                 experimental_config=None, execution_trace_observer=None, acc_events=False,
                 custom_trace_id_callback=None):
        self.activities = set(activities) if activities else supported_activities()
        self.record_shapes, self.profile_memory = record_shapes, profile_memory
        self.with_stack, self.with_flops, self.with_modules = with_stack, with_flops, with_modules
        self.acc_events = acc_events
        self.profiler = None            # the current session (its raw events)
        self._events = None
        self._metadata = {}
        self.use_device = None
        if ProfilerActivity.CUDA in self.activities:
            warnings.warn("CUDA is not available, disabling CUDA profiling", stacklevel=3)

    def prepare_trace(self):
        if self.profiler is None or not self.acc_events:
            self.profiler = _record.Session(self.record_shapes, self.profile_memory,
                                            self.with_stack)
            self._events = None

    def start_trace(self):
        if self.profiler is None:
            raise AssertionError("Profiler must be initialized before starting trace")
        _record.start(self.profiler)

    def stop_trace(self):
        if self.profiler is None:
            raise AssertionError("Profiler must be initialized before stopping trace")
        _record.stop(self.profiler)
        self._events = None

    def start(self):
        self.prepare_trace()
        self.start_trace()

    def stop(self):
        self.stop_trace()

    def events(self):
        """The recorded FunctionEvents (an EventList), ordered by start."""
        if self.profiler is None:
            raise AssertionError("Profiler must be initialized before accessing events")
        if self._events is None or _record.recording() and self.profiler in _record._sessions:
            self._events = build_events(self.profiler, self.profile_memory, self.with_flops)
        return self._events

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0,
                     group_by_overload_name=False):
        """The events averaged by name (and input shapes / stack, if asked): an EventList
        of FunctionEventAvg whose table() prints PyTorch's table."""
        return self.events().key_averages(group_by_input_shape, group_by_stack_n,
                                          group_by_overload_name)

    def export_chrome_trace(self, path):
        """The events as Chrome trace JSON (chrome://tracing, ui.perfetto.dev)."""
        return self.events().export_chrome_trace(path)

    def export_stacks(self, path, metric="self_cpu_time_total"):
        """Each event's user stack with its self time, one line each ('a;b;c 123'), for
        flame graph tools (needs with_stack=True)."""
        if not self.with_stack:
            raise RuntimeError("export_stacks() requires with_stack=True")
        with open(path, "w") as f:
            for e in self.events():
                if e.stack:
                    f.write(";".join(reversed(e.stack)) + f" {int(getattr(e, metric))}\n")

    def add_metadata(self, key, value):
        self._metadata[key] = value

    def add_metadata_json(self, key, value):
        self._metadata[key] = value


class profile(_KinetoProfile):
    """torch.profiler.profile: `with profile(activities=[ProfilerActivity.CPU],
    record_shapes=True) as prof: ...` then `prof.key_averages().table(sort_by=
    "cpu_time_total", row_limit=10)`; with schedule=..., prof.step() at the end of each
    step moves through the schedule's actions, and on_trace_ready(prof) runs at the end of
    each active span (tensorboard_trace_handler(dir) writes the trace)."""

    def __init__(self, *, activities=None, schedule=None, on_trace_ready=None,
                 record_shapes=False, profile_memory=False, with_stack=False, with_flops=False,
                 with_modules=False, experimental_config=None, execution_trace_observer=None,
                 acc_events=False, use_cuda=None, custom_trace_id_callback=None,
                 post_processing_timeout_s=None):
        if use_cuda:
            activities = set(activities or supported_activities()) | {ProfilerActivity.CUDA}
        super().__init__(activities=activities, record_shapes=record_shapes,
                         profile_memory=profile_memory, with_stack=with_stack,
                         with_flops=with_flops, with_modules=with_modules,
                         acc_events=acc_events)
        self.schedule = schedule or _default_schedule_fn
        self.record_steps = schedule is not None
        self.on_trace_ready = on_trace_ready
        self.step_num = 0
        self.step_rec_fn = None
        self.current_action = self.schedule(self.step_num)
        A = ProfilerAction
        prep, start, stop, ready = (self.prepare_trace, self.start_trace, self.stop_trace,
                                    self._trace_ready)
        self.action_map = {
            (A.NONE, A.WARMUP): [prep], (A.NONE, A.RECORD): [prep, start],
            (A.NONE, A.RECORD_AND_SAVE): [prep, start],
            (A.WARMUP, A.NONE): [start, stop], (A.WARMUP, A.RECORD): [start],
            (A.WARMUP, A.RECORD_AND_SAVE): [start],
            (A.RECORD, A.NONE): [stop], (A.RECORD, A.WARMUP): [stop],
            (A.RECORD_AND_SAVE, A.NONE): [stop, ready],
            (A.RECORD_AND_SAVE, A.WARMUP): [stop, ready, prep],
            (A.RECORD_AND_SAVE, A.RECORD): [stop, ready, prep, start],
            (A.RECORD_AND_SAVE, A.RECORD_AND_SAVE): [stop, ready, prep, start],
            (A.WARMUP, None): [start, stop], (A.RECORD, None): [stop, ready],
            (A.RECORD_AND_SAVE, None): [stop, ready],
        }

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        self.stop()

    def start(self):
        self._transit_action(ProfilerAction.NONE, self.current_action)
        if self.record_steps:
            self.step_rec_fn = _record.record_function(f"ProfilerStep#{self.step_num}")
            self.step_rec_fn.__enter__()

    def stop(self):
        if self.record_steps and self.step_rec_fn:
            self.step_rec_fn.__exit__(None, None, None)
            self.step_rec_fn = None
        self._transit_action(self.current_action, None)

    def step(self):
        """The next step begins: the schedule's action for it is taken."""
        if self.record_steps and self.step_rec_fn:
            self.step_rec_fn.__exit__(None, None, None)
            self.step_rec_fn = None
        prev = self.current_action
        action = self.schedule(self.step_num + 1)
        if action == ProfilerAction.DEVICE_STOPPED:
            raise ValueError("ProfilerAction.DEVICE_STOPPED is set internally by the profiler "
                             "and must not be returned by a user-provided schedule")
        self.step_num += 1
        self.current_action = action
        self._transit_action(prev, action)
        if self.record_steps:
            self.step_rec_fn = _record.record_function(f"ProfilerStep#{self.step_num}")
            self.step_rec_fn.__enter__()

    def _trace_ready(self):
        if self.on_trace_ready:
            self.on_trace_ready(self)

    def _transit_action(self, prev, current):
        for action in self.action_map.get((prev, current), ()):
            action()


__all__ = ["profile", "schedule", "supported_activities", "tensorboard_trace_handler",
           "ProfilerAction", "ProfilerActivity", "kineto_available", "EventList"]
