"""autocast: PyTorch's mixed-precision context. CPU autocast runs PyTorch's lists of ops in
its dtype (bfloat16 by default, or float16): matrix products, convolutions and attention
in it, losses in float32 (runtime/autocast_cast.py casts, each op declaring its list).
llgrad has no CUDA device, so autocast for "cuda" disables itself with PyTorch's warning
(as PyTorch does on a machine without CUDA); autocast disabled (`enabled=False`) changes
nothing."""
import functools
import threading
import warnings

from ..runtime import autocast_cast
from ..runtime.dtypes import bfloat16, float16

__all__ = ["autocast", "is_autocast_available", "is_autocast_enabled", "get_autocast_dtype",
           "custom_fwd", "custom_bwd"]

_DEVICES = ("cpu", "cuda", "xpu", "mps", "hpu", "xla", "ipu", "mtia", "maia")


class _State(threading.local):
    def __init__(self):
        self.enabled = {}           # device type -> whether autocast is on
        self.dtypes = {}            # device type -> its dtype set by set_autocast_dtype


_state = _State()


def is_autocast_available(device_type):
    """Whether autocast can run for device_type here: the CPU's only."""
    return device_type == "cpu"


def is_autocast_enabled(device_type=None):
    """Whether autocast is on for device_type (CUDA by default)."""
    return bool(_state.enabled.get(device_type or "cuda", False))


def set_cpu(enabled):
    """Turn CPU autocast on (in get_autocast_dtype('cpu')) or off, for this thread."""
    _state.enabled["cpu"] = bool(enabled)
    autocast_cast.state.dtype = get_autocast_dtype("cpu") if enabled else None


def get_autocast_dtype(device_type):
    """The dtype autocast would use for device_type, as PyTorch's defaults say (bfloat16 on
    the CPU)."""
    default = bfloat16 if device_type in ("cpu", "hpu", "xla", "maia") else float16
    return _state.dtypes.get(device_type, default)


_CPU_DTYPE_WARNING = ("In CPU autocast, but the target dtype is not supported. Disabling "
                      "autocast.\nCPU Autocast only supports dtypes of torch.bfloat16, "
                      "torch.float16 currently.")


class autocast:
    """with autocast(device_type, dtype=None, enabled=True, cache_enabled=None): as
    torch.autocast (see the module's docstring for what runs); also a decorator."""

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        if not isinstance(device_type, str):
            raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
        if device_type not in _DEVICES:
            raise RuntimeError(f"User specified an unsupported autocast device_type "
                               f"'{device_type}'")
        self.device, self.fast_dtype = device_type, dtype
        self._enabled = bool(enabled)
        if self._enabled and device_type != "cpu":
            warnings.warn(f"{device_type.upper() if device_type == 'cuda' else device_type} is "
                          f"not available or torch_xla is imported. Disabling autocast.",
                          stacklevel=2)
            self._enabled = False
        if self._enabled and dtype is not None and dtype not in (bfloat16, float16):
            warnings.warn(_CPU_DTYPE_WARNING, stacklevel=2)
            self._enabled = False

    def __enter__(self):
        self.prev = _state.enabled.get(self.device, False)
        if self.device == "cpu":
            self.prev_dtype = _state.dtypes.get("cpu")
            if self._enabled and self.fast_dtype is not None:
                _state.dtypes["cpu"] = self.fast_dtype
            set_cpu(self._enabled)
        else:
            _state.enabled[self.device] = False
        return self

    def __exit__(self, *exc):
        if self.device == "cpu":
            if self.prev_dtype is None:
                _state.dtypes.pop("cpu", None)
            else:
                _state.dtypes["cpu"] = self.prev_dtype
            set_cpu(self.prev)
        else:
            _state.enabled[self.device] = self.prev
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with autocast(self.device, self.fast_dtype, self._enabled):
                return fn(*args, **kwargs)
        return wrapper


def custom_fwd(fwd=None, *, device_type, cast_inputs=None):
    """Decorator of a custom Function's forward, as torch.amp.custom_fwd: without an enabled
    autocast it runs the forward as it is."""
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)
    return fwd


def custom_bwd(bwd=None, *, device_type):
    """Decorator of a custom Function's backward, as torch.amp.custom_bwd."""
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)
    return bwd
