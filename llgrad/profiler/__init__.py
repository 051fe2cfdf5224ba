"""llgrad.profiler: torch.profiler's names on llgrad (profile, record_function, schedule,
tensorboard_trace_handler, ProfilerActivity, ProfilerAction). Eager ops appear by PyTorch's
aten names (aten::mm, aten::add, ...), autograd nodes as
'autograd::engine::evaluate_function: MulBackward0', compiled calls as
'llgrad::compiled: <function>' with one 'llgrad::kernel: ...' event per kernel inside.
Recording costs nothing while no profile records (one global read per op).

(llgrad.profile, without the r, is llgrad's own profiler of compiled kernel groups.)"""
from ._record import record_function  # noqa: F401
from .events import DeviceType, EventList, FunctionEvent, FunctionEventAvg  # noqa: F401
from .profiler import (ProfilerAction, ProfilerActivity, _KinetoProfile,  # noqa: F401
                       kineto_available, profile, schedule, supported_activities,
                       tensorboard_trace_handler)

__all__ = ["profile", "schedule", "supported_activities", "tensorboard_trace_handler",
           "ProfilerAction", "ProfilerActivity", "kineto_available", "DeviceType",
           "record_function"]
