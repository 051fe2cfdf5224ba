"""The native twister loops (codegen/twister.py) behind ir/torch_random.py's large draws:
dropout masks, torch.rand/randn/randint, nn.init, in eager mode and in compiled code (whose
draws call back into torch_random); and the native float32 Box-Muller of randn / normal_
(codegen/box_muller.py: ATen's vectorised log and sincos, PyTorch's bits as the NumPy
passes of ir/torch_vecmath.py give them, ~40x faster).

The loops are built once per process on the first draw of torch_random.NATIVE_MIN values or
more (then they serve every draw: rand(1000) 107 -> 11-17 us), from the disk cache when an
earlier process built them (no LLVM then), on the eager kernels' builder thread
(eager_builds.py): draws run in NumPy until they are ready, with the same numbers
(tests/runtime/test_native_twister.py holds the two together). LLGRAD_EAGER_NATIVE=0 turns
them off with the other eager kernels; `reset()` forgets them."""
import ctypes

import numpy as np

from ..ir import torch_random
from .eager_builds import PENDING, start
from .eager_native import ENABLED

_FN = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p,
                       ctypes.c_int64)
_BOX_MULLER = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                               ctypes.c_float, ctypes.c_float, ctypes.c_int32)
_loops = {}         # "mt" -> {loop name: ctypes function}, "bm" -> (ctypes function,
                    # address); None (refused) | PENDING
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
        if out.size < torch_random.NATIVE_MIN:  # (a small draw does not load LLVM's code)
            return None
        try:
            loops = start(_loops, "mt", _build)
        except Exception:       # noqa: BLE001 (LLVM refused: NumPy draws, as before)
            loops = _loops["mt"] = None
    if loops is None or loops is PENDING:
        return None
    stats["native_draws"] += 1
    return loops[name][0](key.ctypes.data, pos, out.ctypes.data, out.size)


def _build_box_muller():
    from ..codegen import box_muller    # (the code generator: imported when first needed)
    address = box_muller.build()
    return _BOX_MULLER(int(address)), address


def box_muller(u, mean, std):
    """torch_random's float32 normal_fill hook: the normals of the uniforms u (16 per block,
    C-contiguous float32) into a new array, or None while the loop is not ready (its build
    starts on the first such draw: NumPy's passes cost ~150 us even for 16 values)."""
    loop = _loops.get("bm", False)
    if loop is False:
        try:
            loop = start(_loops, "bm", _build_box_muller)
        except Exception:       # noqa: BLE001 (LLVM refused: NumPy's passes, as before)
            loop = _loops["bm"] = None
    if loop is None or loop is PENDING:
        return None
    out = np.empty_like(u)
    loop[0](u.ctypes.data, out.ctypes.data, u.size // 16, mean, std, int(std != 1 or mean != 0))
    return out


def install(enabled=ENABLED):
    """Large draws on the native loops (enabled) or in NumPy (not)."""
    torch_random.set_native(native_draws if enabled else None)
    torch_random.set_native_box_muller(box_muller if enabled else None)


install()
