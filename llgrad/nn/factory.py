"""What a layer's `device=` and `dtype=` arguments mean for the tensors it creates. llgrad
runs on the CPU (and the meta device: shape-only tensors): a layer asked for another device
raises the creation functions' error before it makes anything, as PyTorch raises for a
device it cannot use, instead of quietly building the layer on the CPU."""
from ..runtime import dtypes
from ..runtime.device import check as check_device
from ..runtime.meta_tensor import is_meta_device


def factory_kwargs(device=None, dtype=None):
    """Keyword arguments for the creation functions from a layer's device and dtype
    arguments; the meta device is passed on (shape-only parameters), a device other than
    it and the CPU raises RuntimeError."""
    kw = {"dtype": dtypes.to_dtype(dtype) if dtype is not None else None}
    if is_meta_device(device):
        kw["device"] = device
    else:
        check_device(device)
    return kw
