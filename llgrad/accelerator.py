"""llgrad.accelerator: torch.accelerator as PyTorch answers it on a machine without an
accelerator (llgrad runs on the CPU only): none available, no devices; what needs a device
raises PyTorch's error."""

__all__ = ["current_accelerator", "current_device_index", "device_count", "is_available",
           "set_device_index", "synchronize", "empty_cache"]

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
