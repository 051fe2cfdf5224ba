"""Native kernels for optimisers' eager updates (codegen/eager_adam.py: Adam's and AdamW's,
one loop per parameter in place of ten NumPy passes; codegen/eager_sgd.py: SGD's, in place of
up to five), built as eager_native.py builds the
eager ops' kernels: on the first call of a (dtype, formula) in the process, from the disk
cache when an earlier process built it, on the builder thread (the update runs its NumPy
passes until the kernel is ready; LLGRAD_COMPILE=sync builds before the call);
LLGRAD_EAGER_NATIVE=0 turns them off. `reset()` forgets the loaded kernels."""
import ctypes
import warnings

from . import eager_builds, eager_native

_kernels = {}       # ("adam" | "sgd", dtype name, flags...) -> (ctypes function, address) | None
_NAMES = {"adam": "Adam", "sgd": "SGD"}
_CTYPES = {"float32": ctypes.c_float, "float64": ctypes.c_double}


def reset():
    """Forget the loaded kernels (after the builds under way)."""
    eager_builds.wait()
    _kernels.clear()


def adam_kernel(dtype, near, decay, start=True, amsgrad=False):
    """The ctypes function of Adam's update loop (codegen/eager_adam.py; amsgrad's takes the
    max_exp_avg_sq pointer fifth), or None (its build is under way, or failed, or, without
    start, not begun: the NumPy passes serve)."""
    return _kernel(("adam", dtype, near, decay, bool(amsgrad)), 5 if amsgrad else 4, 7, start)


def sgd_kernel(dtype, maximize, decay, momentum, nesterov):
    """The ctypes function of SGD's update loop (codegen/eager_sgd.py), or None (its build
    is under way, or failed: the NumPy passes serve)."""
    return _kernel(("sgd", dtype, bool(maximize), bool(decay), bool(momentum), bool(nesterov)),
                   3, 4)


def _kernel(key, pointers, constants, start=True):
    if not eager_native.ENABLED:
        return None
    found = _kernels.get(key, False)
    if found is False and start:
        found = eager_builds.start(_kernels, key, lambda: _build(key, pointers, constants))
    if found is None or found is False or found is eager_builds.PENDING:
        return None
    return found[0]


def _build(key, pointers, constants):
    from ..codegen import eager_adam, eager_sgd     # (loads LLVM, or the disk cache's code)
    name, dtype, flags = key[0], key[1], key[2:]
    try:
        addr = (eager_adam if name == "adam" else eager_sgd).build(dtype, *flags)
    except Exception as e:              # noqa: BLE001
        warnings.warn(f"llgrad: {_NAMES[name]}'s eager update on {dtype} runs on NumPy: its "
                      f"native kernel failed to build ({type(e).__name__}: {e})",
                      RuntimeWarning, stacklevel=2)
        return None
    t = _CTYPES[dtype]
    fn = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * pointers), ctypes.c_int64,
                          *([t] * constants))(int(addr))
    return fn, addr
