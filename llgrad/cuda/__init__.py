"""llgrad.cuda: what PyTorch scripts ask before choosing a device (and amp, the deprecated
torch.cuda.amp). llgrad runs on the CPU only: no CUDA device is ever available, so
`device = "cuda" if llgrad.cuda.is_available() else "cpu"` picks the CPU."""

__all__ = ["is_available", "device_count", "manual_seed", "manual_seed_all"]


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


from . import amp  # noqa: F401,E402  (torch.cuda.amp)
