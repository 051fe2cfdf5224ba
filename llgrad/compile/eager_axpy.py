"""Eager add / sub with an alpha (a + alpha * b, one rounding) on a native kernel: the hook
ir/fused_madd.fused_alpha calls (codegen/eager_axpy.py's loop; NumPy's exact emulation
meanwhile, and for everything this does not take). A call qualifies when a and b are arrays
of one shape and float dtype (the result's), C-contiguous, aligned, of MIN_ELEMENTS or more;
alpha a number. Results are bitwise the emulation's (both round a * b + c once). Built like
the other eager kernels (eager_builds.py); LLGRAD_EAGER_NATIVE=0 turns it off."""
import ctypes
import os

import numpy as np

from ..ir import fused_madd
from ..ir.np_address import data_pointer
from . import eager_builds

ENABLED = os.environ.get("LLGRAD_EAGER_NATIVE", "1") != "0"
MIN_ELEMENTS = 4096
_CTYPES = {np.dtype(np.float32): ctypes.c_float, np.dtype(np.float64): ctypes.c_double}
_kernels = {}           # dtype -> ctypes function | None | eager_builds.PENDING
_fma_kernels = {}       # dtype -> the three-array fma kernel (as _kernels)
stats = {"calls": 0}


def reset():
    eager_builds.wait()
    _kernels.clear()
    _fma_kernels.clear()
    stats["calls"] = 0


def _build(dtype, kind="axpy"):
    """The kernel of kind ("axpy": out, a, b, n, alpha; "fma3": out, x, y, z, n) for dtype as
    a ctypes function, or None (NumPy's emulation serves)."""
    from ..codegen import eager_axpy
    try:
        addr = eager_axpy.build(dtype.name, kind)
    except Exception:       # noqa: BLE001
        return None
    args = [ctypes.c_void_p] * 3 + ([ctypes.c_int64, _CTYPES[dtype]] if kind == "axpy"
                                    else [ctypes.c_void_p, ctypes.c_int64])
    fn = ctypes.CFUNCTYPE(None, *args)(int(addr))
    fn.code = addr              # (keeps the code loaded as long as the function)
    return fn


def axpy(a, b, alpha, dtype, min_elements=MIN_ELEMENTS):
    """a + alpha * b rounded once into a fresh array, or None (the caller emulates it).
    min_elements: 0 where the caller's emulation costs more than a call (a batch norm's
    running statistics, a few hundred values: buffer_update.blend)."""
    if type(a) is not np.ndarray or type(b) is not np.ndarray or a.dtype != dtype or \
            b.dtype != dtype or a.shape != b.shape or a.size < min_elements or \
            dtype not in _CTYPES or not (a.flags.c_contiguous and b.flags.c_contiguous and
                                         a.flags.aligned and b.flags.aligned):
        return None
    fn = _kernels.get(dtype, False)
    if fn is False:
        fn = eager_builds.start(_kernels, dtype, lambda: _build(dtype))
    if fn is None or fn is eager_builds.PENDING:
        return None
    out = np.empty_like(a)
    fn(data_pointer(out), data_pointer(a), data_pointer(b), a.size, alpha)
    stats["calls"] += 1
    return out


def fma3(x, y, z, dtype, min_elements=MIN_ELEMENTS):
    """x * y + z rounded once into a fresh array, or None (the caller emulates it): three
    arrays of one shape and float dtype, C-contiguous and aligned (as axpy)."""
    for v in (x, y, z):
        if type(v) is not np.ndarray or v.dtype != dtype or v.shape != x.shape or \
                not (v.flags.c_contiguous and v.flags.aligned):
            return None
    if x.size < min_elements or dtype not in _CTYPES:
        return None
    fn = _fma_kernels.get(dtype, False)
    if fn is False:
        fn = eager_builds.start(_fma_kernels, dtype, lambda: _build(dtype, "fma3"))
    if fn is None or fn is eager_builds.PENDING:
        return None
    out = np.empty_like(x)
    fn(data_pointer(out), data_pointer(x), data_pointer(y), data_pointer(z), x.size)
    stats["calls"] += 1
    return out


def install(enabled=ENABLED):
    """Make ir/fused_madd.fused_alpha and fma call axpy / fma3 (enabled) or not."""
    fused_madd.set_native_axpy(axpy if enabled else None)
    fused_madd.set_native_fma(fma3 if enabled else None)


install()
