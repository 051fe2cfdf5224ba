"""Eager matrix products on llgrad's threads: the hook ir/np_matmul.py calls for a float
product of two matrices or stacks of them (the op table's mm, addmm, bmm, matmul and their
backward products, the IR interpreter's too) when llgrad runs more than one thread.

Such a product runs on the BLAS shim compiled code calls (codegen/native/blas.py): C's rows
or columns in chunks on llgrad's thread pool, each an OpenBLAS call on one thread. Why not
NumPy's own call, on OpenBLAS's threads: those threads spin for up to ~0.1-0.3 s after every
product they share (OPENBLAS_THREAD_TIMEOUT), holding the second core while llgrad's own
loops want it. Measured on a 2-core host with 2 threads: a compiled transformer block's step
took 4.9 ms right after eager steps against 4.4 ms alone, and a 512x128x128 product on the
pool 158 us against 74 us while OpenBLAS's thread spun. One pool for every thread llgrad
runs keeps eager and compiled code from fighting over the cores.

A product qualifies when llgrad's thread count is above 1, the operands are float32 or
float64 matrices (or stacks whose batch dims broadcast) of one dtype, each matrix with unit
stride along one dim (rows or columns: OpenBLAS's transposes), an `out` (if given) with unit
stride along its rows and apart from both, and each matrix's product has at least MIN_WORK
multiply-adds (below that OpenBLAS runs one thread itself and nothing spins: every product
OpenBLAS would share with its threads comes here, since one left to them wakes them, and
they spin beside llgrad's workers). Others return None and NumPy's matmul runs. The shim is
built (or loaded from the disk cache) on the first qualifying call, as an eager kernel is
(eager_builds.py: NumPy's matmul meanwhile, LLGRAD_COMPILE=sync before the call);
LLGRAD_EAGER_NATIVE=0 turns this off with the rest.
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
    fns = {"code": blas.shim}     # (the shim's code lives as long as these pointers into it)
    for dt, (_, bits) in found.items():
        it = ctypes.c_int64 if bits == 64 else ctypes.c_int32
        ft = ctypes.c_float if dt == "float32" else ctypes.c_double
        proto = ctypes.CFUNCTYPE(None, ctypes.c_int32, ctypes.c_int32, ctypes.c_int32, it, it,
                                 it, ft, ctypes.c_void_p, it, ctypes.c_void_p, it, ft,
                                 ctypes.c_void_p, it)
        fns[dt] = proto(blas.shim.address(blas._SHIM[dt]))
    return fns


def _layout(strides, rows, cols, size):
    """(transpose flag, leading dimension) of a matrix with these strides for OpenBLAS, or
    None: unit stride along its columns (row-major) or its rows (column-major), in whole
    elements."""
    s0, s1 = strides
    if s1 == size and s0 >= cols * size and s0 % size == 0:
        return _NO_TRANS, s0 // size
    if s0 == size and s1 >= rows * size and s1 % size == 0:
        return _TRANS, s1 // size
    return None


def _fits(out, a, b, m, n):
    """Whether out can take the product: a writeable matrix of its shape and dtype, unit
    stride along its rows, overlapping neither operand."""
    size = a.itemsize
    return type(out) is np.ndarray and out.shape == (m, n) and out.dtype == a.dtype and \
        out.flags.aligned and out.flags.writeable and \
        _layout(out.strides, m, n, size) == (_NO_TRANS, out.strides[0] // size) and \
        not np.may_share_memory(out, a) and not np.may_share_memory(out, b)


def matmul(a, b, out=None):
    """a @ b on llgrad's threads (into out, a matrix with unit stride along its rows, or a
    fresh C-contiguous array; stacks of matrices broadcast as np.matmul's, one product per
    matrix), or None: NumPy's matmul runs."""
    if a.ndim < 2 or b.ndim < 2 or type(a) is not np.ndarray or type(b) is not np.ndarray:
        return None                     # (a subclass keeps NumPy's matmul and its type)
    m, k = a.shape[-2:]
    n = b.shape[-1]
    if m * n * k < MIN_WORK or b.shape[-2] != k or a.dtype != b.dtype or \
            a.dtype not in _DTYPES or not (a.flags.aligned and b.flags.aligned):
        return None
    stacked = a.ndim > 2 or b.ndim > 2
    if out is not None and (stacked or not _fits(out, a, b, m, n)):
        return None
    if not _count:
        from ..codegen.native import threadcount
        _count.append(threadcount._count)
    if _count[0].value < 2:
        return None
    size = a.itemsize
    la, lb = _layout(a.strides[-2:], m, k, size), _layout(b.strides[-2:], k, n, size)
    if la is None or lb is None:
        return None
    fns = _shims.get("shim", False)
    if fns is False:
        fns = eager_builds.start(_shims, "shim", _load)
    if fns is None or fns is eager_builds.PENDING:
        return None
    fn = fns[_DTYPES[a.dtype]]
    if stacked:
        return _stack(fn, a, b, la, lb)
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


def _stack(fn, a, b, la, lb):
    """Stacks of matrices (attention's products): one shim call per matrix of the
    broadcast batch (each MIN_WORK or more: the call's ~3 us is a small part), or None
    where the batches do not broadcast (NumPy raises its error)."""
    try:
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        return None
    (m, k), n = a.shape[-2:], b.shape[-1]
    out = np.empty(batch + (m, n), a.dtype)
    if out.size == 0:
        return out
    at = np.indices(batch).reshape(len(batch), -1).T        # every batch index, C order

    def offsets(x, shape):
        strides = np.broadcast_to(x, batch + shape).strides[:-2]    # (0 where broadcast)
        return (at @ np.array(strides, dtype=np.int64)).tolist()

    pa, pb, pc, step = data_pointer(a), data_pointer(b), data_pointer(out), m * n * a.itemsize
    for i, (oa, ob) in enumerate(zip(offsets(a, (m, k)), offsets(b, (k, n)))):
        fn(_ROW_MAJOR, la[0], lb[0], m, n, k, 1.0, pa + oa, la[1], pb + ob, lb[1], 0.0,
           pc + i * step, n)
    stats["calls"] += 1
    return out


def install(enabled=ENABLED):
    """Make ir/np_matmul.py's products run here (enabled) or on NumPy's matmul (not)."""
    np_matmul.set_threaded(matmul if enabled else None)


install()
