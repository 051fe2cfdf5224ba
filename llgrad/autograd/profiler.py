"""torch.autograd.profiler: the older profiler API (profile as a context manager whose
function_events, key_averages(), table() and export_chrome_trace() read what was recorded),
record_function, and emit_nvtx / emit_itt, which are no-ops here (there is no NVTX or ITT
on llgrad: nothing to annotate). Recording is llgrad.profiler's (llgrad/profiler/)."""
from ..profiler import _record
from ..profiler._record import record_function  # noqa: F401
from ..profiler.events import (DeviceType, EventList, FunctionEvent,  # noqa: F401
                               FunctionEventAvg, build_events)
from ..profiler.profiler import ProfilerActivity, kineto_available  # noqa: F401


class profile:
    """torch.autograd.profiler.profile: `with profile(record_shapes=True) as prof: ...`
    then prof.key_averages().table(sort_by="self_cpu_time_total"). use_cuda / use_device
    are accepted and ignored (llgrad profiles the CPU only)."""

    def __init__(self, enabled=True, *, use_cuda=False, use_device=None, record_shapes=False,
                 with_flops=False, profile_memory=False, with_stack=False, with_modules=False,
                 use_kineto=False, use_cpu=True, experimental_config=None, acc_events=False,
                 custom_trace_id_callback=None):
        self.enabled = enabled
        self.record_shapes, self.profile_memory = record_shapes, profile_memory
        self.with_stack, self.with_flops = with_stack, with_flops
        self.use_device = None
        self.function_events = None
        self.entered = False
        self._session = None

    def __enter__(self):
        if not self.enabled:
            return self
        if self.entered:
            raise RuntimeError("Profiler context manager is not reentrant")
        self.entered = True
        self._session = _record.Session(self.record_shapes, self.profile_memory,
                                        self.with_stack)
        _record.start(self._session)
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        if not self.enabled:
            return
        _record.stop(self._session)
        self.function_events = build_events(self._session, self.profile_memory,
                                            self.with_flops)
        return False

    def _check_finish(self):
        if self.function_events is None:
            raise RuntimeError("Profiler didn't finish running")

    def __repr__(self):
        if self.function_events is None:
            return "<unfinished torch.autograd.profile>"
        return repr(self.function_events)

    def __str__(self):
        if self.function_events is None:
            return "<unfinished torch.autograd.profile>"
        return str(self.function_events)

    def table(self, sort_by=None, row_limit=100, max_src_column_width=75,
              max_name_column_width=55, max_shapes_column_width=80, header=None,
              top_level_events_only=False):
        self._check_finish()
        return self.function_events.table(
            sort_by=sort_by, row_limit=row_limit, max_src_column_width=max_src_column_width,
            max_name_column_width=max_name_column_width,
            max_shapes_column_width=max_shapes_column_width, header=header,
            top_level_events_only=top_level_events_only)

    def export_chrome_trace(self, path):
        self._check_finish()
        return self.function_events.export_chrome_trace(path)

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0,
                     group_by_overload_name=False):
        self._check_finish()
        return self.function_events.key_averages(group_by_input_shape, group_by_stack_n,
                                                 group_by_overload_name)

    def total_average(self):
        self._check_finish()
        return self.function_events.total_average()

    @property
    def self_cpu_time_total(self):
        """The sum of the events' self CPU times (us)."""
        self._check_finish()
        return self.function_events.self_cpu_time_total


class emit_nvtx:
    """torch.autograd.profiler.emit_nvtx: NVTX ranges for nvprof; a no-op on llgrad (no
    CUDA, nothing to annotate), usable as a context manager."""

    def __init__(self, enabled=True, record_shapes=False):
        self.enabled, self.record_shapes = enabled, record_shapes

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        return False


class emit_itt(emit_nvtx):
    """torch.autograd.profiler.emit_itt: Intel ITT ranges; a no-op on llgrad."""
