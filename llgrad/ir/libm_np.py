"""The C library's math functions (glibc's libm) elementwise on NumPy arrays: PyTorch's
scalar CPU kernels (the Bessel functions, the polynomials' closed forms, zeta) call
std::cos, std::exp, ... there, and NumPy's own versions of acos, exp, log, pow (and of every
float32 function) differ from them in the last bit, which those functions' series and
cos(n acos x) amplify. Float32 arrays call the float variants (cosf, ...). Where no libm is
found (not glibc), NumPy's functions stand in."""
import ctypes
import ctypes.util

import numpy as np

_NUMPY = {"acos": np.arccos, "cos": np.cos, "sin": np.sin, "exp": np.exp, "log": np.log,
          "pow": np.power}
# float64 functions NumPy computes as glibc does (its loops call libm for them): no calls
_SAME_F64 = ("cos", "sin")


def _load():
    try:
        return ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
    except OSError:
        return None


_LIB = _load()
_UFUNCS = {}        # (name, dtype char) -> the libm function as a NumPy object ufunc


def _ufunc(name, dt):
    key = (name, dt.char)
    u = _UFUNCS.get(key)
    if u is None:
        ct = ctypes.c_float if dt == np.float32 else ctypes.c_double
        fn = getattr(_LIB, name + ("f" if dt == np.float32 else ""))
        nargs = 2 if name == "pow" else 1
        fn.restype, fn.argtypes = ct, [ct] * nargs
        u = _UFUNCS[key] = np.frompyfunc(fn, nargs, 1)
    return u


def libm(name, *xs):
    """libm's function name ("acos", "cos", "sin", "exp", "log", "pow") of float arrays xs
    (broadcast, of one dtype: float32 calls the float variant), elementwise."""
    xs = [np.asarray(x) for x in xs]
    dt = np.result_type(*xs)
    if _LIB is None or dt not in (np.float32, np.float64) or \
            dt == np.float64 and name in _SAME_F64:
        return _NUMPY[name](*xs)
    out = _ufunc(name, dt)(*[x.astype(dt, copy=False) for x in xs])
    return np.asarray(out, dtype=dt)
