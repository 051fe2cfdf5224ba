"""llgrad.cuda: what PyTorch scripts ask before choosing a device (and amp, the deprecated
torch.cuda.amp). llgrad runs on the CPU only: no CUDA device is ever available, so
`device = "cuda" if llgrad.cuda.is_available() else "cpu"` picks the CPU."""

__all__ = ["is_available", "device_count", "manual_seed", "manual_seed_all", "empty_cache",
           "is_initialized", "is_bf16_supported", "seed", "seed_all", "memory_allocated",
           "max_memory_allocated", "memory_reserved", "max_memory_reserved", "synchronize",
           "current_device", "get_device_name", "get_device_properties", "set_device",
           "mem_get_info", "ipc_collect", "get_rng_state", "initial_seed", "OutOfMemoryError"]

_NO_CUDA = "Torch not compiled with CUDA enabled"


class OutOfMemoryError(RuntimeError):
    """As torch.cuda.OutOfMemoryError (also torch.OutOfMemoryError): a RuntimeError raised
    when an allocation fails."""


def is_available():
    """False: llgrad has no CUDA backend."""
    return False


def device_count():
    """0: llgrad has no CUDA backend."""
    return 0


def manual_seed(seed):
    """Does nothing (there is no CUDA generator), as in PyTorch without CUDA."""


def manual_seed_all(seed):
    """Does nothing (there is no CUDA generator), as in PyTorch without CUDA."""


def empty_cache():
    """Does nothing (no CUDA memory is ever cached), as in PyTorch without CUDA."""


def is_initialized():
    """False: CUDA is never initialised."""
    return False


def is_bf16_supported(including_emulation=True):
    """False, as in PyTorch without CUDA."""
    return False


def seed():
    """Does nothing (there is no CUDA generator), as in PyTorch without CUDA."""


seed_all = seed


def memory_allocated(device=None):
    """0, as PyTorch without CUDA answers for the caching allocator's statistics."""
    return 0


max_memory_allocated = memory_reserved = max_memory_reserved = memory_allocated


def _unavailable(*args, **kwargs):
    """Raises PyTorch's AssertionError: there is no CUDA device to ask or to use."""
    raise AssertionError(_NO_CUDA)


synchronize = current_device = get_device_name = get_device_properties = set_device = \
    mem_get_info = get_rng_state = initial_seed = ipc_collect = _unavailable


from .cpu_build import *  # noqa: F401,F403,E402  (what torch's CPU build answers)
from .cpu_build import __all__ as _cpu_build_names  # noqa: E402
__all__ += _cpu_build_names
from . import amp  # noqa: F401,E402  (torch.cuda.amp)
