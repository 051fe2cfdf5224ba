"""llgrad.mps: torch.mps as PyTorch answers it on a machine without Apple's MPS backend, so
that seeding helpers (`torch.mps.manual_seed(s)` unguarded) and device checks run: no MPS
device is available, manual_seed does nothing, and the calls that need the device raise
PyTorch's RuntimeError."""

__all__ = ["Event", "compile_shader", "current_allocated_memory", "device_count",
           "driver_allocated_memory", "empty_cache", "get_rng_state", "is_available",
           "load_metallib", "manual_seed", "recommended_max_memory", "seed",
           "set_per_process_memory_fraction", "set_rng_state", "synchronize"]


def device_count():
    """0: llgrad has no MPS backend."""
    return 0


def is_available():
    """False: llgrad has no MPS backend."""
    return False


def manual_seed(seed):
    """Does nothing, as PyTorch without MPS (torch.manual_seed may call it)."""


def _needs_mps(what):
    def unavailable(*args, **kwargs):
        raise RuntimeError(f"Cannot execute {what}() without MPS backend.")
    unavailable.__doc__ = f"Raises PyTorch's RuntimeError: {what} needs the MPS backend."
    return unavailable


empty_cache = _needs_mps("emptyCache")
synchronize = _needs_mps("deviceSynchronize")
seed = get_rng_state = _needs_mps("getDefaultGenerator")
current_allocated_memory = _needs_mps("getCurrentAllocatedMemory")
driver_allocated_memory = _needs_mps("getDriverAllocatedMemory")
recommended_max_memory = _needs_mps("getRecommendedMaxMemory")
set_per_process_memory_fraction = _needs_mps("setMemoryFraction")


def set_rng_state(new_state, device="mps"):
    """Raises PyTorch's RuntimeError (there is no MPS generator); new_state must be a
    tensor."""
    new_state.clone()
    raise RuntimeError("Cannot execute getDefaultGenerator() without MPS backend.")


def compile_shader(source):
    """Raises PyTorch's RuntimeError: there is no Metal device to compile for."""
    raise RuntimeError("MPS is not available")


def load_metallib(source):
    """Raises PyTorch's RuntimeError: there is no Metal device to load into."""
    raise RuntimeError("MPS is not available")


class Event:
    """torch.mps.Event: nameable, but making one needs the MPS backend."""

    def __init__(self, enable_timing=False):
        raise RuntimeError("Cannot execute acquireEvent() without MPS backend.")
