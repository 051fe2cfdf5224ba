"""The native batch-statistics loop (codegen/eager_bn_stats.py) behind
ir/ops_batch_norm.batch_stats: the update of an eager training batch norm's running statistics
when its forward ran on the shaped kernel, which leaves no statistics behind.

Built once per process on the first such update, from the disk cache when an earlier process
built it (no LLVM then), on the eager kernels' builder thread (eager_builds.py): the
statistics come from NumPy until it is ready. LLGRAD_EAGER_NATIVE=0 turns it off with the
other eager kernels; `reset()` forgets it."""
import ctypes

import numpy as np

from ..ir import ops_batch_norm
from ..ir.np_address import data_pointer
from .eager_builds import PENDING, start
from .eager_native import ENABLED

_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                       ctypes.c_int64, ctypes.c_int64)
_loops = {}         # "bn" -> {dtype name: (ctypes function, address)} | None | PENDING
stats = {"native_stats": 0}


def reset():
    """Forget the loaded loop (built or loaded again on the next update)."""
    _loops.clear()
    stats["native_stats"] = 0


def _build():
    from ..codegen import eager_bn_stats      # (the code generator: imported when needed)
    return {name.rsplit("_", 1)[1]: (_FN(int(a)), a)
            for name, a in eager_bn_stats.build().items()}


def native_stats(x):
    """ops_batch_norm's hook: (mean, sum of squared deviations, count) per channel of a
    C-contiguous float (N, C, *) array x, or None while the loop is not ready."""
    loops = _loops.get("bn", False)
    if loops is False:
        try:
            loops = start(_loops, "bn", _build)
        except Exception:       # noqa: BLE001 (LLVM refused: NumPy computes them, as before)
            loops = _loops["bn"] = None
    if loops is None or loops is PENDING:
        return None
    n, c = x.shape[:2]
    mean, ss = np.empty(c), np.empty(c)
    loops[x.dtype.name][0](data_pointer(mean), data_pointer(ss), data_pointer(x), n, c,
                           x.size // (n * c))
    stats["native_stats"] += 1
    return mean, ss, x.size // c


def install(enabled=ENABLED):
    """Batch statistics on the native loop (enabled) or in NumPy (not)."""
    ops_batch_norm.set_native_stats(native_stats if enabled else None)


install()
