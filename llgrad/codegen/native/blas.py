"""The BLAS that NumPy's wheel ships (OpenBLAS with 64-bit integers), found with ctypes and
made callable from JIT code with `llvm.add_symbol`. `LLGRAD_BLAS=0` disables it (float
matmuls then call llgrad's own GEMM, gemm.py)."""
import ctypes
import glob
import os

import numpy

_found = None

# (symbol, width of its integer arguments), per dtype, most specific first
_CANDIDATES = {
    "float32": [("scipy_cblas_sgemm64_", 64), ("cblas_sgemm64_", 64), ("cblas_sgemm", 32)],
    "float64": [("scipy_cblas_dgemm64_", 64), ("cblas_dgemm64_", 64), ("cblas_dgemm", 32)],
}


def _libraries():
    base = os.path.dirname(numpy.__file__)
    pats = [os.path.join(base, os.pardir, "numpy.libs", "lib*openblas*.so*"),
            os.path.join(base, ".dylibs", "lib*openblas*.dylib"),
            os.path.join(base, os.pardir, "numpy.libs", "*openblas*.dll")]
    for pat in pats:
        yield from sorted(glob.glob(pat))


def gemm_symbols():
    """{dtype: (symbol, int_bits)} for the gemm routines found (empty when none is)."""
    global _found
    if _found is None:
        _found = {}
        if os.environ.get("LLGRAD_BLAS", "1") != "0":
            _found = _search()
    return _found


def _search():
    from . import jit   # (here: set_num_threads needs no LLVM)
    for path in _libraries():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        found = {}
        for dt, cands in _CANDIDATES.items():
            for sym, bits in cands:
                try:
                    fn = getattr(lib, sym)
                except AttributeError:
                    continue
                jit.add_symbol(sym, ctypes.cast(fn, ctypes.c_void_p).value)
                found[dt] = (sym, bits)
                break
        if found:
            _found_lib.append(lib)         # keep it loaded
            return found
    return {}


_found_lib = []


def _reset():
    global _found
    _found = None


def set_num_threads(n):
    """Set the thread count of NumPy's OpenBLAS (what NumPy's own matmuls use too); True
    if the library offers the call. Small matrices run faster on one thread."""
    for path in _libraries():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for sym in ("scipy_openblas_set_num_threads64_", "openblas_set_num_threads64_",
                    "openblas_set_num_threads"):
            fn = getattr(lib, sym, None)
            if fn is not None:
                fn.argtypes = [ctypes.c_int]
                fn(int(n))
                return True
    return False
