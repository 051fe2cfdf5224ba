"""Triangular solves on the OpenBLAS NumPy's wheel ships (cblas ?trsm, 64-bit integers),
reached with ctypes: NumPy has no triangular solve, and a loop over the rows with one NumPy
call each took ~60% of a 256x256 GP training step (PyTorch calls trsm). Also where that
library is (codegen/native/openblas.py reads it from here: this layer may not import
codegen).

`trsm(a, x, upper, left, trans, unit)` overwrites the C-contiguous float32/float64 batch x
with op(A)^-1 X (left) or X op(A)^-1 (right), A broadcast over x's batch. It returns False,
touching nothing, where it does not apply (no such library, another dtype, a batch of many
matrices too small for one call each to pay): the caller then loops over the rows. A zero
pivot gives inf/nan as trsm does for PyTorch."""
import ctypes
import glob
import os

import numpy as np

__all__ = ["libraries", "trsm"]

_ROW_MAJOR, _LEFT, _RIGHT, _UPPER, _LOWER = 101, 141, 142, 121, 122
_NO_TRANS, _TRANS, _NON_UNIT, _UNIT = 111, 112, 131, 132
# (a call costs ~1 us of ctypes; the row loop ~10 us a row for the whole batch)
_MATRICES_PER_ROW = 8
_SYMBOLS = {np.dtype(np.float32): ("scipy_cblas_strsm64_", ctypes.c_float),
            np.dtype(np.float64): ("scipy_cblas_dtrsm64_", ctypes.c_double)}
_found = None


def libraries():
    """Paths of the OpenBLAS libraries NumPy's wheel ships (none for other builds)."""
    base = os.path.dirname(np.__file__)
    pats = [os.path.join(base, os.pardir, "numpy.libs", "lib*openblas*.so*"),
            os.path.join(base, ".dylibs", "lib*openblas*.dylib"),
            os.path.join(base, os.pardir, "numpy.libs", "*openblas*.dll")]
    for pat in pats:
        yield from sorted(glob.glob(pat))


def _routines():
    """{dtype: ctypes function} of the trsm routines found (empty if none)."""
    global _found
    if _found is None:
        found = {}
        if os.environ.get("LLGRAD_BLAS", "1") != "0":
            for path in libraries():
                try:
                    lib = ctypes.CDLL(path)
                except OSError:
                    continue
                for dt, (sym, scalar) in _SYMBOLS.items():
                    fn = getattr(lib, sym, None)
                    if fn is not None:
                        i32, i64, p = ctypes.c_int, ctypes.c_int64, ctypes.c_void_p
                        fn.argtypes = [i32] * 5 + [i64, i64, scalar, p, i64, p, i64]
                        fn.restype = None
                        found[dt] = fn
                if found:
                    break
        _found = found
    return _found


def _reset():
    global _found
    _found = None


def _row_major(a):
    """(array whose matrices have unit column stride, transposed?) for a batch of A."""
    s = a.strides[-2:]
    it = a.itemsize
    if s[1] == it and s[0] >= max(1, a.shape[-1]) * it and s[0] % it == 0:
        return a, False
    if s[0] == it and s[1] >= max(1, a.shape[-2]) * it and s[1] % it == 0:
        return np.swapaxes(a, -1, -2), True
    return np.ascontiguousarray(a), False


def trsm(a, x, upper, left=True, trans=False, unit=False):
    """x := op(A)^-1 x (left) or x op(A)^-1 (right) in place, op(A) = A^T with trans; False
    (x untouched) where it does not apply (the module docstring)."""
    fn = _routines().get(x.dtype)
    if fn is None or not x.flags.c_contiguous or a.dtype != x.dtype:
        return False
    m, n = x.shape[-2:]
    count = x.size // max(1, m * n) if x.size else 0
    if x.size == 0 or a.shape[-1] == 0:
        return True
    if count > _MATRICES_PER_ROW * a.shape[-1]:
        return False
    a, flipped = _row_major(a)
    # (a one-row A's row stride is any number, broadcast_to's 0 among them: trsm wants at
    # least its order)
    lda = a.strides[-2] // a.itemsize if a.shape[-2] > 1 else max(1, a.shape[-1])
    a = np.broadcast_to(a, x.shape[:-2] + a.shape[-2:])
    if flipped:         # (A's transpose is row-major: solve with it, the other triangle)
        upper, trans = not upper, not trans
    side = _LEFT if left else _RIGHT
    uplo = _UPPER if upper else _LOWER
    op = _TRANS if trans else _NO_TRANS
    diag = _UNIT if unit else _NON_UNIT
    base, xb = a.ctypes.data, x.ctypes.data
    size = m * n * x.itemsize
    for j, idx in enumerate(np.ndindex(*x.shape[:-2])):
        off = sum(i * s for i, s in zip(idx, a.strides[:-2]))
        fn(_ROW_MAJOR, side, uplo, op, diag, m, n, 1.0, base + off, lda, xb + j * size, n)
    return True
