"""The native twister loops (codegen/twister.py) behind ir/torch_random.py's large draws:
dropout masks, torch.rand/randn/randint, nn.init, in eager mode and in compiled code (whose
draws call back into torch_random).

The loops are built once per process on the first draw of torch_random.NATIVE_MIN values or
more, from the disk cache when an earlier process built them (no LLVM then), on the eager
kernels' builder thread (eager_builds.py): draws run in NumPy until they are ready, with the
same numbers (tests/runtime/test_native_twister.py holds the two together).
LLGRAD_EAGER_NATIVE=0 turns them off with the other eager kernels; `reset()` forgets them."""
import ctypes

from ..ir import torch_random
from .eager_builds import PENDING, start
from .eager_native import ENABLED

_FN = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p,
                       ctypes.c_int64)
_loops = {}         # "mt" -> {loop name: ctypes function} | None (refused) | PENDING
stats = {"native_draws": 0}


def reset():
    """Forget the loaded loops (built or loaded again on the next large draw)."""
    _loops.clear()
    stats["native_draws"] = 0


def _build():
    from ..codegen import twister       # (the code generator: imported when first needed)
    addresses = twister.build()
    return {name: (_FN(int(a)), a) for name, a in addresses.items()}


def native_draws(name, key, pos, out):
    """torch_random's hook: the loop `name` on the words in key from pos into out; the new
    position, or None while the loops are not ready."""
    loops = _loops.get("mt", False)
    if loops is False:
        try:
            loops = start(_loops, "mt", _build)
        except Exception:       # noqa: BLE001 (LLVM refused: NumPy draws, as before)
            loops = _loops["mt"] = None
    if loops is None or loops is PENDING:
        return None
    stats["native_draws"] += 1
    return loops[name][0](key.ctypes.data, pos, out.ctypes.data, out.size)


def install(enabled=ENABLED):
    """Large draws on the native loops (enabled) or in NumPy (not)."""
    torch_random.set_native(native_draws if enabled else None)


install()
