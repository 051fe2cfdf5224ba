"""Native kernels for optimisers' eager updates (codegen/eager_adam.py: Adam's and AdamW's,
one loop per parameter in place of ten NumPy passes), built as eager_native.py builds the
eager ops' kernels: on the first call of a (dtype, formula) in the process, from the disk
cache when an earlier process built it, on the builder thread (the update runs its NumPy
passes until the kernel is ready; LLGRAD_COMPILE=sync builds before the call);
LLGRAD_EAGER_NATIVE=0 turns them off. `reset()` forgets the loaded kernels."""
import ctypes
import warnings

from . import eager_builds, eager_native

_kernels = {}       # (dtype name, lerp near, decay form) -> (ctypes function, address) | None
_CTYPES = {"float32": ctypes.c_float, "float64": ctypes.c_double}


def reset():
    """Forget the loaded kernels (after the builds under way)."""
    eager_builds.wait()
    _kernels.clear()


def adam_kernel(dtype, near, decay):
    """The ctypes function of Adam's update loop (codegen/eager_adam.py), or None (its build
    is under way, or failed: the NumPy passes serve)."""
    if not eager_native.ENABLED:
        return None
    key = (dtype, near, decay)
    found = _kernels.get(key, False)
    if found is False:
        found = eager_builds.start(_kernels, key, lambda: _build(*key))
    if found is None or found is eager_builds.PENDING:
        return None
    return found[0]


def _build(dtype, near, decay):
    from ..codegen import eager_adam     # (loads LLVM, or the disk cache's code)
    try:
        addr = eager_adam.build(dtype, near, decay)
    except Exception as e:              # noqa: BLE001
        warnings.warn(f"llgrad: Adam's eager update on {dtype} runs on NumPy: its native "
                      f"kernel failed to build ({type(e).__name__}: {e})", RuntimeWarning,
                      stacklevel=2)
        return None
    t = _CTYPES[dtype]
    fn = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * 4), ctypes.c_int64, *([t] * 7))(int(addr))
    return fn, addr
