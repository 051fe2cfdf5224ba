"""The calling thread's flush-to-zero and denormals-are-zero flags (MXCSR's bits 15 and 6 on
x86-64), for set_flush_denormal: set through glibc's fegetenv / fesetenv, whose x86-64
fenv_t ends with the MXCSR word, so no compiler is needed. With them on, every float
operation on this thread reads a subnormal operand as zero and writes zero for a subnormal
result: NumPy's loops, OpenBLAS's calls here, and llgrad's native code, whose pool workers
take the caller's flags with each job (codegen/lowerings/pool.py). As in PyTorch, other
Python threads keep their own flags, and so do threads llgrad does not own (OpenBLAS's own,
behind an eager np.dot at 2 threads).

Whether the setting took is checked by its effect (a subnormal times one), so an unfamiliar
libc or CPU returns False and changes nothing."""
import ctypes
import platform

import numpy as np

_FTZ_DAZ = 0x8040
_ENV_BYTES, _MXCSR_AT = 32, 28
_libm = []          # [the CDLL, or None where unsupported]: loaded on the first call


def _lib():
    if not _libm:
        lib = None
        if platform.system() == "Linux" and platform.machine() in ("x86_64", "AMD64"):
            try:
                lib = ctypes.CDLL("libm.so.6")
                lib.fegetenv.argtypes = lib.fesetenv.argtypes = [ctypes.c_void_p]
            except (OSError, AttributeError):
                lib = None
        _libm.append(lib)
    return _libm[0]


def _flushes():
    tiny = np.array([1e-39], np.float32)        # (subnormal in float32)
    return float((tiny * np.float32(1.0))[0]) == 0.0


def set_flush(mode):
    """Flush subnormals on this thread (mode) or not; whether the CPU now does as asked."""
    lib = _lib()
    if lib is None:
        return False
    env = ctypes.create_string_buffer(_ENV_BYTES)
    if lib.fegetenv(env) != 0:
        return False
    before = env.raw
    csr = int.from_bytes(before[_MXCSR_AT:_MXCSR_AT + 4], "little")
    csr = csr | _FTZ_DAZ if mode else csr & ~_FTZ_DAZ
    after = ctypes.create_string_buffer(before[:_MXCSR_AT] + csr.to_bytes(4, "little"),
                                        _ENV_BYTES)
    if lib.fesetenv(after) != 0:
        return False
    if _flushes() != bool(mode):        # (a layout this module does not know: undone)
        lib.fesetenv(ctypes.create_string_buffer(before, _ENV_BYTES))
        return False
    return True
