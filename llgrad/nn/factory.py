"""What a layer's `device=` and `dtype=` arguments mean for the tensors it creates. llgrad
runs on the CPU only: a layer asked for another device raises the creation functions' error
before it makes anything, as PyTorch raises for a device it cannot use, instead of quietly
building the layer on the CPU."""
from ..runtime import dtypes
from ..runtime.device import check as check_device


def factory_kwargs(device=None, dtype=None):
    """Keyword arguments for the creation functions from a layer's device and dtype
    arguments; a device other than the CPU raises RuntimeError."""
    check_device(device)
    return {"dtype": dtypes.to_dtype(dtype) if dtype is not None else None}
