"""torch.*'s autocast state functions over llgrad.amp's state (autocast_mode.py): the
enabled flag and dtype per device type, the weight-cast cache flag, and the deprecated
CPU-only forms with PyTorch's DeprecationWarnings. Enabling CPU autocast casts as entering
llgrad.autocast("cpu") does; other device types only keep the flag (no op here runs on
them)."""
import warnings

from ..runtime import autocast_cast
from ..runtime.dtypes import dtype as _dtype
from .autocast_mode import _DEVICES, _state, get_autocast_dtype, is_autocast_enabled, set_cpu

__all__ = ["get_autocast_cpu_dtype", "set_autocast_cpu_dtype", "is_autocast_cpu_enabled",
           "set_autocast_cpu_enabled", "set_autocast_dtype", "set_autocast_enabled",
           "is_autocast_cache_enabled", "set_autocast_cache_enabled", "clear_autocast_cache",
           "autocast_increment_nesting", "autocast_decrement_nesting"]



def _deprecated(old, new):
    warnings.warn(f"torch.{old} is deprecated. Please use torch.{new} instead.",
                  DeprecationWarning, stacklevel=3)


def _device(device_type, fn):
    if not isinstance(device_type, str):
        raise TypeError(f"{fn}(): argument 'device_type' (position 1) must be str, not "
                        f"{type(device_type).__name__}")
    if device_type not in _DEVICES:
        raise RuntimeError(f"User specified an unsupported autocast device_type "
                           f"'{device_type}'")
    return device_type


def set_autocast_enabled(device_type, enabled=None):
    """As torch.set_autocast_enabled(device_type, enabled) (or (enabled), for CUDA)."""
    if enabled is None:
        device_type, enabled = "cuda", device_type
    _device(device_type, "set_autocast_enabled")
    if device_type == "cpu":
        set_cpu(enabled)
    else:
        _state.enabled[device_type] = bool(enabled)


def set_autocast_dtype(device_type, dtype):
    """As torch.set_autocast_dtype: the dtype autocast on device_type would use."""
    _device(device_type, "set_autocast_dtype")
    if not isinstance(dtype, (_dtype, str)):
        raise TypeError(f"set_autocast_dtype(): argument 'dtype' (position 2) must be "
                        f"torch.dtype, not {type(dtype).__name__}")
    _state.dtypes[device_type] = dtype
    if device_type == "cpu" and is_autocast_enabled("cpu"):
        set_cpu(True)                   # (the casts take the new dtype)


def get_autocast_cpu_dtype():
    """As torch.get_autocast_cpu_dtype (deprecated): get_autocast_dtype('cpu')."""
    _deprecated("get_autocast_cpu_dtype()", "get_autocast_dtype('cpu')")
    return get_autocast_dtype("cpu")


def set_autocast_cpu_dtype(dtype):
    """As torch.set_autocast_cpu_dtype (deprecated): set_autocast_dtype('cpu', dtype)."""
    _deprecated("set_autocast_cpu_dtype(dtype)", "set_autocast_dtype('cpu', dtype)")
    set_autocast_dtype("cpu", dtype)


def is_autocast_cpu_enabled():
    """As torch.is_autocast_cpu_enabled (deprecated): is_autocast_enabled('cpu')."""
    _deprecated("is_autocast_cpu_enabled()", "is_autocast_enabled('cpu')")
    return is_autocast_enabled("cpu")


def set_autocast_cpu_enabled(enabled):
    """As torch.set_autocast_cpu_enabled (deprecated): set_autocast_enabled('cpu', ...)."""
    _deprecated("set_autocast_cpu_enabled(enabled)", "set_autocast_enabled('cpu', enabled)")
    set_autocast_enabled("cpu", enabled)


def is_autocast_cache_enabled():
    """As torch.is_autocast_cache_enabled: whether autocast caches its weight casts."""
    return autocast_cast.state.cache_enabled


def set_autocast_cache_enabled(enabled):
    """As torch.set_autocast_cache_enabled."""
    autocast_cast.state.cache_enabled = bool(enabled)


def clear_autocast_cache():
    """As torch.clear_autocast_cache: forget the cached weight casts."""
    autocast_cast.state.casts.clear()


def autocast_increment_nesting():
    """As torch.autocast_increment_nesting: one more autocast level; the new depth."""
    autocast_cast.state.nesting += 1
    return autocast_cast.state.nesting


def autocast_decrement_nesting():
    """As torch.autocast_decrement_nesting: one autocast level fewer; the new depth."""
    autocast_cast.state.nesting -= 1
    return autocast_cast.state.nesting


def _device_forms(device, name):
    """The deprecated get/set_autocast_<name>_dtype and is/set_autocast_<name>_enabled."""
    def get_dtype():
        _deprecated(f"get_autocast_{name}_dtype()", f"get_autocast_dtype('{device}')")
        return get_autocast_dtype(device)

    def set_dtype(dtype):
        _deprecated(f"set_autocast_{name}_dtype(dtype)", f"set_autocast_dtype('{device}', dtype)")
        set_autocast_dtype(device, dtype)

    def is_enabled():
        _deprecated(f"is_autocast_{name}_enabled()", f"is_autocast_enabled('{device}')")
        return is_autocast_enabled(device)

    def set_enabled(enabled):
        _deprecated(f"set_autocast_{name}_enabled(enabled)",
                    f"set_autocast_enabled('{device}', enabled)")
        set_autocast_enabled(device, enabled)
    forms = {f"get_autocast_{name}_dtype": get_dtype, f"set_autocast_{name}_dtype": set_dtype,
             f"is_autocast_{name}_enabled": is_enabled,
             f"set_autocast_{name}_enabled": set_enabled}
    for fname, fn in forms.items():
        fn.__name__ = fn.__qualname__ = fname
        fn.__doc__ = f"As torch.{fname} (deprecated): the '{device}' form of the generic one."
        globals()[fname] = fn
        __all__.append(fname)


_device_forms("cuda", "gpu")
_device_forms("ipu", "ipu")
_device_forms("xla", "xla")
