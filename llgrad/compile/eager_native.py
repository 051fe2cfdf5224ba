"""Eager ops on native kernels: the hook runtime/dispatch.py calls for the ops the table marks
`eager_native` (erf, GELU, sigmoid, SiLU, softplus, ...), with codegen/eager_kernels.py's
shape-free loops.

A call qualifies when its one tensor operand is float32 or float64, holds at least
MIN_ELEMENTS elements (below that NumPy's passes are cheap, and a short script or a test
never loads LLVM for them) and is contiguous in memory (C or Fortran order: the result keeps
the layout, as NumPy's ufuncs do); the other operands are Python numbers. Everything else
runs the op's NumPy implementation. A kernel is built on the first call of its (op, dtype,
numbers, attributes) in the process, from the disk cache when an earlier process built it
(no LLVM then). Results are within an ulp or two of the NumPy implementation (the lowering
compiled code runs; the op-table tests hold the two together), never a different method.

LLGRAD_EAGER_NATIVE=0 turns it off; `reset()` forgets the loaded kernels (they are built or
loaded again on their next call); `stats` counts calls and builds."""
import ctypes
import os
import warnings

import numpy as np

from ..runtime import dispatch

MIN_ELEMENTS = 4096
ENABLED = os.environ.get("LLGRAD_EAGER_NATIVE", "1") != "0"
_KERNEL = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))

_kernels = {}       # (op name, dtype name, numbers, attrs) -> (ctypes function, address) | None
stats = {"calls": 0, "built": 0}


def reset():
    """Forget the loaded kernels and the counts."""
    _kernels.clear()
    stats.update(calls=0, built=0)


def _key(op, dtype, numbers, attrs):
    try:
        key = (op.name, dtype.name, tuple((type(v), v) for v in numbers),
               tuple(sorted(attrs.items())))
        hash(key)
    except TypeError:               # (an unhashable attribute: not one of these ops')
        return None
    return key


def _kernel(key, op, dtype, numbers, attrs):
    from ..codegen import eager_kernels      # (loads llvmlite: only when a kernel is needed)
    try:
        addr = eager_kernels.build(op.name, dtype.name, numbers, attrs)
    except Exception as e:          # noqa: BLE001 (LLVM refused it: NumPy's impl serves)
        warnings.warn(f"llgrad: eager {op.name} on {dtype.name} runs on NumPy: its native "
                      f"kernel failed to build ({type(e).__name__}: {e})", RuntimeWarning,
                      stacklevel=2)
        addr = None
    found = _kernels[key] = None if addr is None else (_KERNEL(int(addr)), addr)
    stats["built"] += addr is not None
    return found


def native_eager(op, arrays, attrs):
    """op on arrays with attrs on its native kernel, or None (NumPy's impl runs instead)."""
    x = arrays[0]
    if type(x) is not np.ndarray or x.size < MIN_ELEMENTS or x.dtype not in _FLOATS:
        return None
    numbers = arrays[1:]
    for v in numbers:
        if type(v) not in (int, float, bool):
            return None
    flags = x.flags
    if not (flags.c_contiguous or flags.f_contiguous):
        return None
    key = _key(op, x.dtype, numbers, attrs)
    if key is None:
        return None
    found = _kernels.get(key, False)
    if found is False:
        found = _kernel(key, op, x.dtype, numbers, attrs)
    if found is None:
        return None
    out = np.empty_like(x)          # (the same memory order as x: one flat loop serves both)
    found[0](out.ctypes.data, x.ctypes.data, x.size)
    stats["calls"] += 1
    return out


def install(enabled=ENABLED):
    """Make the dispatcher run eager_native ops here (enabled) or on NumPy (not)."""
    dispatch.set_native_eager(native_eager if enabled else None)


install()
