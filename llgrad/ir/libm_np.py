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
    if name == "exp" and dt == np.float32:
        return _expf(xs[0].astype(dt, copy=False))
    return _call(name, dt, *xs)


def _call(name, dt, *xs):
    with np.errstate(all="ignore"):    # (libm's overflow to inf is the result, not an error)
        out = _ufunc(name, dt)(*[x.astype(dt, copy=False) for x in xs])
    return np.asarray(out, dtype=dt)


# glibc's expf is within 0.502 ulp of exp(x) (its source's bound), so it returns the
# correctly rounded float wherever exp(x) lies more than 0.002 ulp from a midpoint between
# two floats; float64's exp (error ~1e-16, a 1e-9 ulp of float32) rounded to float32 is that
# float there. Elements nearer a midpoint (about 1%), and non-finite, zero or subnormal
# results, are libm's own call: the same bits, ten times faster than a call per element.
_EXPF_MARGIN = 0.005


def _expf(x):
    shape, x = x.shape, x.reshape(-1)      # (a 0-d operand's results are NumPy scalars)
    with np.errstate(over="ignore", under="ignore", invalid="ignore", divide="ignore"):
        y = np.exp(x.astype(np.float64))
        r = y.astype(np.float32)
        toward = np.where(y >= r, np.float32(np.inf), np.float32(-np.inf))
        other = np.nextafter(r, toward).astype(np.float64)
        near = ~(np.abs(y - (r + other) / 2) > _EXPF_MARGIN * np.abs(other - r))
    near |= ~(r >= np.finfo(np.float32).tiny) | np.isinf(r)
    if near.any():
        r[near] = _call("exp", np.dtype(np.float32), x[near])
    return r.reshape(shape)
