"""autocast: PyTorch's mixed-precision context. CPU autocast runs PyTorch's lists of ops in
its dtype (bfloat16 by default, or float16): matrix products, convolutions and attention
in it, losses in float32 (runtime/autocast_cast.py casts, each op declaring its list).
llgrad has no CUDA device, so autocast for "cuda" disables itself with PyTorch's warning
(as PyTorch does on a machine without CUDA); autocast disabled (`enabled=False`) changes
nothing."""
import collections.abc
import functools
import threading
import warnings

import numpy as np

from ..runtime import autocast_cast
from ..runtime.dtypes import bfloat16, float16, float64
from ..runtime.tensor import Tensor

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
        self._cache_enabled = autocast_cast.state.cache_enabled if cache_enabled is None \
            else bool(cache_enabled)
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
        ac = autocast_cast.state
        self.prev_cache, ac.cache_enabled = ac.cache_enabled, self._cache_enabled
        ac.nesting += 1
        if self.device == "cpu":
            # (the casts' dtype as it was: None inside a backward pass under autocast)
            self.prev_dtype, self.prev_low = _state.dtypes.get("cpu"), autocast_cast.state.dtype
            if self._enabled and self.fast_dtype is not None:
                _state.dtypes["cpu"] = self.fast_dtype
            set_cpu(self._enabled)
        else:
            _state.enabled[self.device] = False
        return self

    def __exit__(self, *exc):
        ac = autocast_cast.state
        ac.nesting -= 1
        if not ac.nesting:
            ac.casts.clear()
        ac.cache_enabled = self.prev_cache
        if self.device == "cpu":
            if self.prev_dtype is None:
                _state.dtypes.pop("cpu", None)
            else:
                _state.dtypes["cpu"] = self.prev_dtype
            _state.enabled["cpu"], autocast_cast.state.dtype = self.prev, self.prev_low
        else:
            _state.enabled[self.device] = self.prev
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with autocast(self.device, self.fast_dtype, self._enabled, self._cache_enabled):
                return fn(*args, **kwargs)
        return wrapper


def _cast_inputs(value, dtype):
    """value with its floating tensors but float64 ones in dtype (PyTorch's amp._cast),
    through lists, tuples and mappings."""
    if isinstance(value, Tensor):
        return value.to(dtype) if value.is_floating_point() and value.dtype is not float64 \
            else value
    if isinstance(value, (str, bytes, np.ndarray)):
        return value
    if isinstance(value, collections.abc.Mapping):
        return {_cast_inputs(k, dtype): _cast_inputs(v, dtype) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_cast_inputs(v, dtype) for v in value)
    return value


def custom_fwd(fwd=None, *, device_type, cast_inputs=None):
    """Decorator of a custom Function's forward, as torch.amp.custom_fwd: the forward runs
    under the caller's autocast, or, given cast_inputs, with autocast off and its floating
    tensor arguments in cast_inputs; ctx keeps the state for custom_bwd."""
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def decorate_fwd(*args, **kwargs):
        args[0]._dtype = get_autocast_dtype(device_type)
        if cast_inputs is None:
            args[0]._fwd_used_autocast = is_autocast_enabled(device_type)
            return fwd(*args, **kwargs)
        args[0]._fwd_used_autocast = False
        if not is_autocast_enabled(device_type):
            return fwd(*args, **kwargs)
        with autocast(device_type, enabled=False):
            return fwd(*_cast_inputs(args, cast_inputs), **_cast_inputs(kwargs, cast_inputs))
    return decorate_fwd


def custom_bwd(bwd=None, *, device_type):
    """Decorator of a custom Function's backward, as torch.amp.custom_bwd: it runs under the
    autocast state its custom_fwd forward ran in (backward passes run without it)."""
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)

    @functools.wraps(bwd)
    def decorate_bwd(*args, **kwargs):
        with autocast(device_type, enabled=args[0]._fwd_used_autocast, dtype=args[0]._dtype):
            return bwd(*args, **kwargs)
    return decorate_bwd
