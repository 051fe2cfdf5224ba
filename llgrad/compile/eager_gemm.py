"""Eager matrix products on llgrad's threads: the hook ir/np_matmul.py calls for a float
product of two matrices (the op table's mm, addmm, matmul and their backward products, the
IR interpreter's too) when llgrad runs more than one thread.

Such a product runs on the BLAS shim compiled code calls (codegen/native/blas.py): C's rows
or columns in chunks on llgrad's thread pool, each an OpenBLAS call on one thread. Why not
NumPy's own call, on OpenBLAS's threads: those threads spin for up to ~0.1-0.3 s after every
product they share (OPENBLAS_THREAD_TIMEOUT), holding the second core while llgrad's own
loops want it. Measured on a 2-core host with 2 threads: a compiled transformer block's step
took 4.9 ms right after eager steps against 4.4 ms alone, and a 512x128x128 product on the
pool 158 us against 74 us while OpenBLAS's thread spun. One pool for every thread llgrad
runs keeps eager and compiled code from fighting over the cores.

A product qualifies when llgrad's thread count is above 1, the operands are float32 or
float64 matrices of one dtype, each with unit stride along one dim (rows or columns:
OpenBLAS's transposes), an `out` (if given) with unit stride along its rows and apart from
both, and it has at least MIN_WORK multiply-adds (below that OpenBLAS runs one thread itself
and nothing spins: every product OpenBLAS would share with its threads comes here, since
one product left to them wakes them, and they spin beside llgrad's workers). Others return None
and NumPy's matmul runs. The shim is built (or loaded from the disk cache) on the first
qualifying call, as an eager kernel is (eager_builds.py: NumPy's matmul meanwhile,
LLGRAD_COMPILE=sync before the call); LLGRAD_EAGER_NATIVE=0 turns this off with the rest.
Results are OpenBLAS's products of the same operands, rows or columns split as compiled code
splits them: within rounding of NumPy's (the order of each dot product's adds is OpenBLAS's
kernel's in both), deterministic for a given thread count. `stats` counts calls."""
import ctypes
import os

import numpy as np

from ..ir import np_matmul
from ..ir.np_address import data_pointer
from . import eager_builds

ENABLED = os.environ.get("LLGRAD_EAGER_NATIVE", "1") != "0"
MIN_WORK = 65536 * 4            # multiply-adds: where OpenBLAS starts a second thread
_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112
_DTYPES = {np.dtype(np.float32): "float32", np.dtype(np.float64): "float64"}
_shims = {}                 # "shim" -> {dtype: ctypes function} | None | eager_builds.PENDING
_count = []                 # threadcount's word (imported on the first big product: it
                            # loads llvmlite, which `import llgrad` does not)
stats = {"calls": 0}


def reset():
    """Forget the loaded shims (loaded again on the next call) and the count."""
    eager_builds.wait()
    _shims.clear()
    stats["calls"] = 0


def _load():
    """{dtype name: ctypes function of the shim}, or None where no shim is built (no
    OpenBLAS, or LLGRAD_BLAS=0: NumPy's matmul serves)."""
    from ..codegen.native import blas
    found = blas.gemm_symbols()
    if not found or blas.shim is None:
        return None
    fns = {}
    for dt, (_, bits) in found.items():
        it = ctypes.c_int64 if bits == 64 else ctypes.c_int32
        ft = ctypes.c_float if dt == "float32" else ctypes.c_double
        proto = ctypes.CFUNCTYPE(None, ctypes.c_int32, ctypes.c_int32, ctypes.c_int32, it, it,
                                 it, ft, ctypes.c_void_p, it, ctypes.c_void_p, it, ft,
                                 ctypes.c_void_p, it)
        fns[dt] = proto(blas.shim.address(blas._SHIM[dt]))
    return fns


def _layout(x, rows, cols, size):
    """(transpose flag, leading dimension) of a matrix for OpenBLAS, or None: unit stride
    along its columns (row-major) or its rows (column-major), in whole elements."""
    s0, s1 = x.strides
    if s1 == size and s0 >= cols * size and s0 % size == 0:
        return _NO_TRANS, s0 // size
    if s0 == size and s1 >= rows * size and s1 % size == 0:
        return _TRANS, s1 // size
    return None


def matmul(a, b, out=None):
    """a @ b on llgrad's threads (into out, a matrix with unit stride along its rows, or a
    fresh C-contiguous array), or None: NumPy's matmul runs."""
    if a.ndim != 2 or b.ndim != 2:
        return None
    m, k = a.shape
    n = b.shape[1]
    if m * n * k < MIN_WORK or b.shape[0] != k or a.dtype != b.dtype or \
            a.dtype not in _DTYPES or not (a.flags.aligned and b.flags.aligned):
        return None
    size = a.itemsize
    if out is not None and not (type(out) is np.ndarray and out.shape == (m, n) and
                                out.dtype == a.dtype and out.flags.aligned and
                                out.flags.writeable and
                                _layout(out, m, n, size) == (_NO_TRANS, out.strides[0] // size)
                                and not np.may_share_memory(out, a) and
                                not np.may_share_memory(out, b)):
        return None
    if not _count:
        from ..codegen.native import threadcount
        _count.append(threadcount._count)
    if _count[0].value < 2:
        return None
    la, lb = _layout(a, m, k, size), _layout(b, k, n, size)
    if la is None or lb is None:
        return None
    fns = _shims.get("shim", False)
    if fns is False:
        fns = eager_builds.start(_shims, "shim", _load)
    if fns is None or fns is eager_builds.PENDING:
        return None
    fn = fns[_DTYPES[a.dtype]]
    stats["calls"] += 1
    if out is None and m <= 64 < n and la[0] == _NO_TRANS and lb[0] == _TRANS:
        # x @ w.T with few rows (a Linear's forward): as np_matmul.py's, (w @ x.T).T, since
        # OpenBLAS's kernel for a transposed right operand runs few rows at 1.5x the time
        out = np.empty((n, m), a.dtype)
        fn(_ROW_MAJOR, _NO_TRANS, _TRANS, n, m, k, 1.0, data_pointer(b), lb[1],
           data_pointer(a), la[1], 0.0, data_pointer(out), m)
        return out.T.copy()
    if out is None:
        out = np.empty((m, n), a.dtype)
    fn(_ROW_MAJOR, la[0], lb[0], m, n, k, 1.0, data_pointer(a), la[1], data_pointer(b), lb[1],
       0.0, data_pointer(out), out.strides[0] // size)
    return out


def install(enabled=ENABLED):
    """Make ir/np_matmul.py's products run here (enabled) or on NumPy's matmul (not)."""
    np_matmul.set_threaded(matmul if enabled else None)


install()
