"""PyTorch's global settings that tutorial scripts set at the top, with PyTorch's checks and
errors: the float32 matmul precision, deterministic algorithms (and their debug mode), the
warn-always flag, the inter-op thread count, flush-denormal; and torch.typename /
torch.is_storage.

llgrad runs on the CPU, where PyTorch's settings here change no number either: the matmul
precision only picks TF32/bfloat16 paths of accelerators, and every llgrad kernel is
deterministic already (NumPy, or native loops with a fixed order of adds), so the
deterministic mode only records the setting. There are no inter-op threads (the count is
kept, as torch's, and can be set once); set_flush_denormal sets the CPU's flush-to-zero flags
on the calling thread (fpu_flags.py), as torch does. `_reset()` restores every default (tests)."""
import builtins
import os
import threading
import warnings

from . import fpu_flags, trace_state
from .functions import export
from .tensor import Storage, Tensor


class _Settings:
    lock = threading.Lock()
    matmul_precision = "highest"
    deterministic = False
    deterministic_warn_only = False
    warn_always = False
    interop_threads = None          # None: not set yet (then the default below)
    interop_set = False
    flush_denormal = False          # (set on some thread by set_flush_denormal: _reset clears it)
    warned_once = set()             # the keys warn_once has warned for


def _reset():
    """Every setting of this module back to its default (and warn_once forgets)."""
    with _Settings.lock:
        _Settings.matmul_precision = "highest"
        _Settings.deterministic = _Settings.deterministic_warn_only = False
        _Settings.warn_always = False
        _Settings.interop_threads, _Settings.interop_set = None, False
        _Settings.warned_once = set()
        if _Settings.flush_denormal:
            fpu_flags.set_flush(False)
            _Settings.flush_denormal = False


def warn_once(key, message, category=UserWarning, stacklevel=3):
    """PyTorch's TORCH_WARN_ONCE: warn the first time for key, every time after
    set_warn_always(True)."""
    with _Settings.lock:
        first = key not in _Settings.warned_once
        _Settings.warned_once.add(key)
    if _Settings.warn_always:
        warnings.warn(message, category, stacklevel=stacklevel)
    elif first:
        trace_state.warn_first(message, category, stacklevel=stacklevel)


def _is_bool(x):
    return isinstance(x, bool)


def _type_name(x):
    return type(x).__name__


# ---- float32 matmul precision ------------------------------------------------------------------

def set_float32_matmul_precision(precision):
    """As torch.set_float32_matmul_precision: 'highest' (the default), 'high' or 'medium';
    any other string warns and changes nothing. On the CPU no precision changes a result."""
    if not isinstance(precision, str):
        raise RuntimeError(f"set_float32_matmul_precision expects a str, but got "
                           f"{_type_name(precision)}")
    if precision not in ("highest", "high", "medium"):
        warnings.warn(f"{precision} is not one of 'highest', 'high', or 'medium'; the current"
                      "setFloat32MatmulPrecision call has no effect.", stacklevel=2)
        return
    _Settings.matmul_precision = precision


def get_float32_matmul_precision():
    """As torch.get_float32_matmul_precision: the last precision set ('highest' at start)."""
    return _Settings.matmul_precision


# ---- deterministic algorithms ------------------------------------------------------------------

def _set_deterministic(mode, warn_only=False):
    with _Settings.lock:
        _Settings.deterministic, _Settings.deterministic_warn_only = mode, warn_only


def use_deterministic_algorithms(mode, *, warn_only=False):
    """As torch.use_deterministic_algorithms(mode, *, warn_only=False): records the setting
    (every llgrad kernel is deterministic already, so nothing raises or warns because of it)."""
    if not _is_bool(mode):
        raise TypeError(f"_set_deterministic_algorithms(): argument 'mode' (position 1) must be "
                        f"bool, not {_type_name(mode)}")
    if not _is_bool(warn_only):
        raise TypeError(f"_set_deterministic_algorithms(): argument 'warn_only' must be bool, "
                        f"not {_type_name(warn_only)}")
    _set_deterministic(mode, warn_only)


def are_deterministic_algorithms_enabled():
    """As torch.are_deterministic_algorithms_enabled."""
    return _Settings.deterministic


def is_deterministic_algorithms_warn_only_enabled():
    """As torch.is_deterministic_algorithms_warn_only_enabled."""
    return _Settings.deterministic_warn_only


def set_deterministic_debug_mode(debug_mode):
    """As torch.set_deterministic_debug_mode: 'default' or 0 (off), 'warn' or 1 (on, warn
    only), 'error' or 2 (on)."""
    if not isinstance(debug_mode, (builtins.int, str)):
        raise TypeError(f"debug_mode must be str or int, but got {type(debug_mode)}")
    if isinstance(debug_mode, str):
        modes = {"default": 0, "warn": 1, "error": 2}
        if debug_mode not in modes:
            raise RuntimeError("invalid value of debug_mode, expected one of `default`, `warn`, "
                               f"`error`, but got {debug_mode}")
        debug_mode = modes[debug_mode]
    if debug_mode not in (0, 1, 2):
        raise RuntimeError(f"invalid value of debug_mode, expected 0, 1, or 2, but got "
                           f"{debug_mode}")
    _set_deterministic(debug_mode != 0, debug_mode == 1)


def get_deterministic_debug_mode():
    """As torch.get_deterministic_debug_mode: 0 off, 1 warn only, 2 error."""
    if not _Settings.deterministic:
        return 0
    return 1 if _Settings.deterministic_warn_only else 2


# ---- warnings ----------------------------------------------------------------------------------

def set_warn_always(b, /):
    """As torch.set_warn_always: True makes the warnings PyTorch gives once per process
    (llgrad's warn_once) appear every time."""
    if not _is_bool(b):
        raise RuntimeError(f"setWarnOnlyOnce expects a bool, but got {_type_name(b)}")
    _Settings.warn_always = b


def is_warn_always_enabled():
    """As torch.is_warn_always_enabled."""
    return _Settings.warn_always


# ---- threads and denormals ---------------------------------------------------------------------

def get_num_interop_threads():
    """As torch.get_num_interop_threads: the count set, else the usable CPUs (llgrad runs no
    inter-op pool: the number is kept for scripts that read it)."""
    if _Settings.interop_threads is not None:
        return _Settings.interop_threads
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def set_num_interop_threads(n):
    """As torch.set_num_interop_threads: a positive int, settable once per process (torch's
    error on a second call)."""
    if not isinstance(n, builtins.int) or isinstance(n, bool):
        raise RuntimeError(f"set_num_interop_threads expects an int, but got {_type_name(n)}")
    if n <= 0:
        raise RuntimeError("set_num_interop_threads expects a positive integer")
    with _Settings.lock:
        if _Settings.interop_set:
            raise RuntimeError("Error: cannot set number of interop threads after parallel "
                               "work has started or set_num_interop_threads called")
        _Settings.interop_threads, _Settings.interop_set = n, True


def set_flush_denormal(mode):
    """As torch.set_flush_denormal(mode) -> bool: subnormal floats read and written as zero
    on this thread (and in llgrad's native code it runs) from now on, or no longer; True
    where the CPU does so (x86-64 Linux), else False and nothing changes (fpu_flags.py)."""
    if not _is_bool(mode):
        raise RuntimeError(f"flush_denormal expects a bool, but got {_type_name(mode)}")
    done = fpu_flags.set_flush(bool(mode))
    if done:
        _Settings.flush_denormal = bool(mode)
    return done


# ---- type queries ------------------------------------------------------------------------------

def typename(obj, /):
    """As torch.typename: a tensor's type() ('llgrad.FloatTensor'), else the object's
    module-qualified name (a builtin's bare name)."""
    if isinstance(obj, Tensor):
        return obj.type()
    module = getattr(obj, "__module__", "") or ""
    if hasattr(obj, "__qualname__"):
        qualname = obj.__qualname__
    elif hasattr(obj, "__name__"):
        qualname = obj.__name__
    else:
        module = obj.__class__.__module__ or ""
        qualname = obj.__class__.__qualname__
    if module in ("", "builtins"):
        return qualname
    return f"{module}.{qualname}"


def is_storage(obj, /):
    """As torch.is_storage: whether obj is a storage (what Tensor.untyped_storage() gives)."""
    return type(obj) is Storage


for _f in (set_float32_matmul_precision, get_float32_matmul_precision,
           use_deterministic_algorithms, are_deterministic_algorithms_enabled,
           is_deterministic_algorithms_warn_only_enabled, set_deterministic_debug_mode,
           get_deterministic_debug_mode, set_warn_always, is_warn_always_enabled,
           get_num_interop_threads, set_num_interop_threads, set_flush_denormal, typename,
           is_storage):
    export(_f)
