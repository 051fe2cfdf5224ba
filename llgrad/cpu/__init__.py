"""llgrad.cpu: torch.cpu, the CPU as a device module (the one device llgrad runs on): always
available, one device, streams and events that are already done (every call finishes before
it returns), and the deprecated torch.cpu.amp."""
import os
from contextlib import contextmanager

from . import amp  # noqa: F401

__all__ = ["Event", "Stream", "StreamContext", "amp", "current_device", "current_stream",
           "device_count", "get_capabilities", "is_available", "is_initialized", "set_device",
           "stream", "synchronize"]


def is_available():
    """True: the CPU is always there."""
    return True


def is_initialized():
    """True."""
    return True


def device_count():
    """1: the CPU is one device."""
    return 1


def current_device():
    """'cpu'."""
    return "cpu"


def set_device(device):
    """Nothing to do: the CPU is the only device (as PyTorch, any argument is accepted)."""


def synchronize(device=None):
    """Nothing to wait for: every llgrad call has finished when it returns."""


class Stream:
    """torch.cpu.Stream: the CPU's one stream, on which work is done when a call returns."""

    def __init__(self, priority=-1):
        self.priority = priority

    def wait_stream(self, stream):
        """Nothing to wait for."""

    def wait_event(self, event):
        """Nothing to wait for."""

    def record_event(self, event=None):
        """An Event, already complete."""
        return event if event is not None else Event()

    def query(self):
        """True: all work is done."""
        return True

    def synchronize(self):
        """Nothing to wait for."""


class Event:
    """torch.cpu.Event: a marker that is complete as soon as it is recorded."""

    def record(self, stream=None):
        """Nothing to record: work is done when a call returns."""

    def wait(self, stream=None):
        """Nothing to wait for."""

    def query(self):
        """True."""
        return True

    def synchronize(self):
        """Nothing to wait for."""


_stream = Stream()


def current_stream(device=None):
    """The CPU's stream."""
    return _stream


class StreamContext:
    """with StreamContext(stream): nothing changes (the CPU has one stream)."""

    def __init__(self, stream):
        self.stream = stream

    def __enter__(self):
        return self.stream

    def __exit__(self, *exc):
        return False


@contextmanager
def stream(stream):
    """with llgrad.cpu.stream(s): as torch.cpu.stream (nothing changes)."""
    yield stream


def get_capabilities():
    """What torch.cpu.get_capabilities reports that llgrad can tell without probing the CPU:
    its architecture and logical cores (the LLVM kernels are built for the host's own
    features: llgrad.backends.cpu.get_cpu_capability)."""
    return {"architecture": os.uname().machine, "num_logical_cores": os.cpu_count() or 1}
