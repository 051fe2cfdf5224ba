"""Eager atan2 of two arrays on a native kernel: the hook ir/ops_special.py's atan2 calls
(np.arctan2, libm's scalar loop, was ~9x torch's vectorised kernel). The kernel is the loop
codegen/eager_kernels.py builds from the lowering compiled code runs (special_kernels.atan2
in double, rounded once: within float rounding of torch's and NumPy's). A call qualifies
when y and x are arrays of one shape and float dtype, both C-contiguous (or both Fortran-
contiguous: one flat loop serves), of MIN_ELEMENTS or more; everything else runs NumPy's.
Built like the other eager kernels (eager_builds.py); LLGRAD_EAGER_NATIVE=0 turns it off."""
import ctypes
import os
import warnings

import numpy as np

from ..ir import ops_special
from ..ir.builder import Builder
from ..ir.graph import TensorType
from ..ir.np_address import data_pointer
from . import eager_builds, eager_threads

ENABLED = os.environ.get("LLGRAD_EAGER_NATIVE", "1") != "0"
MIN_ELEMENTS = 4096
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_kernels = {}           # (op name, dtype) -> (ctypes function, address) | None | PENDING
stats = {"calls": 0}


def reset():
    eager_builds.wait()
    _kernels.clear()
    stats["calls"] = 0


def _address(op_name, dtype):
    """The kernel's address: from the disk cache (a warm process imports no lowering), else
    built from the graph of op on two inputs."""
    from ..codegen import eager_cache
    key = eager_cache.op_key(op_name + ":binary", dtype, (), {})
    found = eager_cache.cached(key)
    if found is not None:
        return found
    from ..codegen import eager_kernels      # (the code generator: a kernel to build)
    b = Builder(f"eager_{op_name}_binary")
    y, x = (b.input(TensorType(dtype, (1,)), n) for n in ("y", "x"))
    return eager_kernels.build_graph(b.ret(b.add(op_name, [y, x], {})), dtype, key)


def _kernel(op_name, dtype):
    try:
        addr = _address(op_name, dtype.name)
    except Exception as e:          # noqa: BLE001
        warnings.warn(f"llgrad: eager {op_name} on {dtype.name} runs on NumPy: its native "
                      f"kernel failed to build ({type(e).__name__}: {e})", RuntimeWarning,
                      stacklevel=3)
        return None
    if addr is None:
        return None
    fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                          ctypes.c_int64)(int(addr))
    return fn, addr


def binary(op_name, y, x):
    """op(y, x) elementwise into a fresh array (x's memory order), or None (NumPy's)."""
    if type(y) is not np.ndarray or type(x) is not np.ndarray or y.dtype != x.dtype or \
            y.shape != x.shape or y.size < MIN_ELEMENTS or x.dtype not in _FLOATS:
        return None
    fy, fx = y.flags, x.flags
    if not (fy.aligned and fx.aligned and (fy.c_contiguous and fx.c_contiguous or
                                           fy.f_contiguous and fx.f_contiguous)):
        return None
    key = (op_name, x.dtype)
    found = _kernels.get(key, False)
    if found is False:
        dtype = x.dtype
        found = eager_builds.start(_kernels, key, lambda: _kernel(op_name, dtype))
    if found is None or found is eager_builds.PENDING:
        return None
    out = np.empty_like(x)
    eager_threads.elementwise(found, (data_pointer(out), data_pointer(y), data_pointer(x)),
                              x.size, x.itemsize)
    stats["calls"] += 1
    return out


def _atan2(y, x):
    return binary("atan2", y, x)


def install(enabled=ENABLED):
    """Make the eager atan2 call the native kernel (enabled) or np.arctan2 (not)."""
    ops_special.set_native_atan2(_atan2 if enabled else None)


install()
