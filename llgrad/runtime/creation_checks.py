"""PyTorch's checks and inference rules for the Python numbers creation functions store:
the overflow errors of tensor(..., dtype=) and full(), and the dtype NumPy float scalars
give torch.tensor."""
import numpy as np

from . import dtypes


def check_fits(arr, d):
    """PyTorch's overflow check of Python numbers given an integer dtype (an unsigned one
    takes an integer down to -max, wrapping it)."""
    if d.is_floating_point or d is dtypes.bool_ or arr.size == 0 or arr.dtype.kind not in "iuf":
        return
    info = np.iinfo(d.np)
    lo = (-info.max if arr.dtype.kind in "iu" else -1 + 1e-9) if info.min == 0 else info.min
    with np.errstate(invalid="ignore"):
        if not (np.isfinite(arr).all() and arr.min() >= lo and arr.max() <= info.max):
            raise RuntimeError(f"value cannot be converted to type {d.name} without overflow")


_PLAIN = {float, int, bool}


def float_leaves(data):
    """The NumPy float dtype of the NumPy float scalars in nested lists (torch.tensor
    infers float64 from a np.float64), None if there are none."""
    types = set(map(type, data))
    if types <= _PLAIN:             # (the common case, at C speed)
        return None
    found = None
    for x in data:
        if isinstance(x, (list, tuple)):
            x = float_leaves(x)
        elif isinstance(x, np.floating):
            x = x.dtype
        else:
            continue
        if x is not None:
            found = x if found is None else np.promote_types(found, x)
    return found


_C_NAMES = {"int64": "int64_t", "int32": "int", "int16": "int16_t", "int8": "int8_t",
            "uint8": "uint8_t", "float32": "float"}


def fill_value_fits(value, d):
    """PyTorch's overflow check of a Python number stored into a tensor of dtype d (an
    unsigned type takes a negative number down to -max, wrapping it); the value to store."""
    if d.name not in _C_NAMES or isinstance(value, (bool, complex)) or hasattr(value, "_dtype"):
        return value
    info = np.finfo(d.np) if d.is_floating_point else np.iinfo(d.np)
    if d.is_floating_point:
        bad = np.isfinite(value) and abs(value) > info.max
    elif value != value or value in (np.inf, -np.inf):
        bad = True
    else:
        v = int(value)
        bad = not (-(info.max if info.min == 0 else -info.min) <= v <= info.max)
        value = v % (info.max + 1) if info.min == 0 and v < 0 else value
    if bad:
        raise RuntimeError(f"value cannot be converted to type {_C_NAMES[d.name]} without "
                           "overflow")
    return value


def tensor_scalars(data, is_tensor):
    """data (nested lists) with each tensor in it (is_tensor) as its one element, a NumPy
    scalar of its dtype: torch.tensor([t1, t2]) takes one-element tensors as numbers and
    refuses others; data itself when it holds no tensor."""
    if set(map(type, data)) <= _PLAIN:      # (the common case, at C speed)
        return data
    out, changed = [], False
    for x in data:
        if is_tensor(x):
            if x._data.size != 1:
                raise ValueError("only one element tensors can be converted to Python scalars")
            # (item(): inside a compiled function, a read of the value the trace guards)
            x, changed = x._data.dtype.type(x.item()), True
        elif isinstance(x, (list, tuple)):
            y = tensor_scalars(x, is_tensor)
            changed = changed or y is not x
            x = y
        out.append(x)
    return out if changed else data
