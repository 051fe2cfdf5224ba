"""llgrad.accelerator: torch.accelerator as PyTorch answers it on a machine without an
accelerator (llgrad runs on the CPU only): none available, no devices; what needs a device
raises PyTorch's error."""

__all__ = ["current_accelerator", "current_device_index", "device_count", "is_available",
           "set_device_index", "synchronize", "empty_cache", "device_index", "Graph",
           "current_stream", "empty_host_cache", "get_device_capability", "get_memory_info",
           "max_memory_allocated", "max_memory_reserved", "memory_allocated",
           "memory_reserved", "memory_stats", "reset_accumulated_memory_stats",
           "reset_peak_memory_stats"]

_NONE = "Cannot access accelerator device when none is available."


def is_available(check_available=False):
    """False: llgrad has no accelerator."""
    return False


def current_accelerator(check_available=False):
    """None: there is no accelerator."""
    return None


def device_count():
    """0."""
    return 0


def current_device_index():
    raise RuntimeError(_NONE)


current_device_idx = current_device_index


def set_device_index(device):
    raise RuntimeError(_NONE)


set_device_idx = set_device_index


def synchronize(device=None):
    raise RuntimeError(_NONE)


def empty_cache():
    """Nothing to free (no accelerator memory)."""


def _no_accelerator(*args, **kwargs):
    """Raises PyTorch's RuntimeError: the call needs an accelerator device."""
    raise RuntimeError(_NONE)


# (memory statistics, streams and graphs of the current accelerator: PyTorch raises)
current_stream = empty_host_cache = get_device_capability = get_memory_info = \
    max_memory_allocated = max_memory_reserved = memory_allocated = memory_reserved = \
    memory_stats = reset_accumulated_memory_stats = reset_peak_memory_stats = _no_accelerator


class Graph:
    """torch.accelerator.Graph: capturing a graph needs an accelerator (PyTorch raises)."""

    def __init__(self, *args, **kwargs):
        raise RuntimeError(_NONE)


class device_index:
    """Context manager selecting the accelerator's device index, as
    torch.accelerator.device_index: None is a no-op; an index needs an accelerator."""

    def __init__(self, device, /):
        self.idx = device
        self.prev_idx = -1

    def __enter__(self):
        if self.idx is not None:
            raise RuntimeError(_NONE)

    def __exit__(self, *exc_info):
        return None
