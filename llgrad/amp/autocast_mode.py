"""autocast: PyTorch's mixed-precision context. llgrad has no CUDA device, so autocast for
"cuda" disables itself with PyTorch's warning (as PyTorch does on a machine without CUDA);
autocast disabled (`enabled=False`, how scripts written for both run on the CPU) changes
nothing. CPU autocast itself (bfloat16 / float16 matrix products and convolutions) is not
emulated: entering it raises, rather than giving float32 numbers where PyTorch would give
lower-precision ones."""
import functools
import threading
import warnings

from ..runtime.dtypes import bfloat16, float16

__all__ = ["autocast", "is_autocast_available", "is_autocast_enabled", "get_autocast_dtype",
           "custom_fwd", "custom_bwd"]

_DEVICES = ("cpu", "cuda", "xpu", "mps", "hpu", "xla", "ipu", "mtia", "maia")


class _State(threading.local):
    def __init__(self):
        self.enabled = {}           # device type -> whether autocast is on (never for the CPU)
        self.dtypes = {}            # device type -> its dtype set by set_autocast_dtype


_state = _State()


def is_autocast_available(device_type):
    """Whether autocast can run for device_type here: the CPU's only (and llgrad raises on
    entering it enabled: see the module's docstring)."""
    return device_type == "cpu"


def is_autocast_enabled(device_type=None):
    """Whether autocast is on for device_type (CUDA by default): never for the CPU, whose
    autocast llgrad does not emulate; another device's flag as set_autocast_enabled left it."""
    return bool(_state.enabled.get(device_type or "cuda", False))


def get_autocast_dtype(device_type):
    """The dtype autocast would use for device_type, as PyTorch's defaults say (bfloat16 on
    the CPU: a name only, llgrad has no bfloat16 tensors)."""
    default = bfloat16 if device_type in ("cpu", "hpu", "xla", "maia") else float16
    return _state.dtypes.get(device_type, default)


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

    def __enter__(self):
        if self._enabled:
            raise NotImplementedError(
                "llgrad.autocast(device_type='cpu') with enabled=True: CPU mixed precision "
                "(bfloat16 / float16 matrix products and convolutions) is not emulated (llgrad "
                "has no bfloat16), so it would not give PyTorch's numbers; run without it "
                "(enabled=False) for float32 results")
        self.prev = _state.enabled.get(self.device, False)
        _state.enabled[self.device] = False
        return self

    def __exit__(self, *exc):
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
