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


def canonical_factory_kwargs(kwargs):
    """torch.nn.factory_kwargs (exported under that name): a module's **kwargs as the dict of
    device / dtype / memory_format to pass to creation functions, with PyTorch's checks (no
    other key; a key given both directly and in a nested `factory_kwargs` dict is an
    error)."""
    if kwargs is None:
        return {}
    simple_keys = {"device", "dtype", "memory_format"}
    expected_keys = simple_keys | {"factory_kwargs"}
    if not kwargs.keys() <= expected_keys:
        raise TypeError(f"unexpected kwargs {kwargs.keys() - expected_keys}")
    r = dict(kwargs.get("factory_kwargs", {}))
    for k in simple_keys:
        if k in kwargs:
            if k in r:
                raise TypeError(f"{k} specified twice, in **kwargs and in factory_kwargs")
            r[k] = kwargs[k]
    return r
