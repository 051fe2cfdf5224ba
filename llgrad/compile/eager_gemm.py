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
they spin beside llgrad's workers). A stack of smaller products (attention's) runs on
eager_bgemm.py's batched kernel where that gains: its batch over the threads, or, on any
count, a transposed B copied to row-major per product (_small_stack). Others return None
and NumPy's matmul runs. The shim is
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
from . import eager_builds, eager_threads

ENABLED = os.environ.get("LLGRAD_EAGER_NATIVE", "1") != "0"
MIN_WORK = 65536 * 4            # multiply-adds: where OpenBLAS starts a second thread
_BGEMM_PACK = 1 << 14           # = codegen/eager_bgemm.PACK_LIMIT, its stack slot (tested)
_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112
_DTYPES = {np.dtype(np.float32): "float32", np.dtype(np.float64): "float64"}
_shims = {}                 # "shim" -> {dtype: ctypes function} | None | eager_builds.PENDING
_stack_plans = {}           # (dtype, shapes, strides, threads) -> _stack_plan's (or None)
_count = []                 # threadcount's word (imported on the first big product: it
                            # loads llvmlite, which `import llgrad` does not)
stats = {"calls": 0}


def reset():
    """Forget the loaded shims (loaded again on the next call) and the count."""
    eager_builds.wait()
    _shims.clear()
    _stack_plans.clear()
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
    if b.shape[-2] != k or a.dtype != b.dtype or a.dtype not in _DTYPES or \
            not (a.flags.aligned and b.flags.aligned):
        return None
    stacked = a.ndim > 2 or b.ndim > 2
    if m * n * k < MIN_WORK:
        return _small_stack(a, b, m, n, k) if stacked and out is None else None
    if out is not None and (stacked or not _fits(out, a, b, m, n)):
        return None
    if _threads() < 2:
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


def _threads():
    if not _count:
        from ..codegen.native import threadcount
        _count.append(threadcount._count)
    return _count[0].value


def _batch(a, b):
    try:
        return np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        return None


def _offsets(batch, x, shape):
    """Byte offsets of x's matrix at every index of batch (C order; 0 along broadcast
    dims), an int64 array."""
    at = np.indices(batch).reshape(len(batch), -1).T
    strides = np.broadcast_to(x, batch + shape).strides[:-2]
    return at @ np.array(strides, dtype=np.int64)


def _stack(fn, a, b, la, lb):
    """Stacks of matrices (attention's products): one shim call per matrix of the
    broadcast batch (each MIN_WORK or more: the call's ~3 us is a small part), or None
    where the batches do not broadcast (NumPy raises its error)."""
    batch = _batch(a, b)
    if batch is None:
        return None
    (m, k), n = a.shape[-2:], b.shape[-1]
    out = np.empty(batch + (m, n), a.dtype)
    if out.size == 0:
        return out
    pa, pb, pc, step = data_pointer(a), data_pointer(b), data_pointer(out), m * n * a.itemsize
    offsets = zip(_offsets(batch, a, (m, k)).tolist(), _offsets(batch, b, (k, n)).tolist())
    for i, (oa, ob) in enumerate(offsets):
        fn(_ROW_MAJOR, la[0], lb[0], m, n, k, 1.0, pa + oa, la[1], pb + ob, lb[1], 0.0,
           pc + i * step, n)
    stats["calls"] += 1
    return out


def _small_stack(a, b, m, n, k):
    """A stack of products too small for the shim to split (attention's): the batch over
    llgrad's threads, and a transposed B copied to row-major per product (eager_bgemm.py),
    or None: NumPy's matmul, where neither applies (one thread and no transposed B) or the
    batched kernel is not built yet."""
    threads = _threads()
    key = (a.dtype, a.shape, a.strides, b.shape, b.strides, threads)     # (strides: bytes)
    plan = _stack_plans.get(key, False)
    if plan is False:
        plan = _stack_plans[key] = _stack_plan(a, b, m, n, k, threads)
        if len(_stack_plans) > 64:          # (a bound, not an LRU: shapes rarely vary)
            _stack_plans.clear()
    fns = _bgemm() if plan is not None else None
    if fns is None:
        return None
    offsets, params, batch, t = plan
    out = np.empty(batch + (m, n), a.dtype)
    recs = offsets + np.array([data_pointer(a), data_pointer(b), data_pointer(out),
                               data_pointer(params)], np.int64)
    _run_records(fns[_DTYPES[a.dtype]], recs, t)
    return out


def _stack_plan(a, b, m, n, k, threads):
    """(every product's record less the addresses of A, B, C and the params (nb x 4 int64:
    byte offsets), eager_bgemm's params, the batch, the chunk count) of a stack's product,
    or None where NumPy's matmul runs."""
    size = a.itemsize
    la, lb = _layout(a.strides[-2:], m, k, size), _layout(b.strides[-2:], k, n, size)
    batch = _batch(a, b)
    if la is None or lb is None or batch is None or m * n * k == 0:
        return None
    nb = int(np.prod(batch))
    pack = lb[0] == _TRANS and m > 1 and k * n <= _BGEMM_PACK
    split = threads > 1 and nb > 1 and nb * m * n * k >= 2 * MIN_WORK
    t = min(threads * eager_threads.OVERSPLIT, nb) if split else 1
    if t < 2 and not pack or nb == 0:
        return None
    offsets = np.zeros((nb, 4), np.int64)
    offsets[:, 0] = _offsets(batch, a, (m, k))
    offsets[:, 1] = _offsets(batch, b, (k, n))
    offsets[:, 2] = np.arange(nb, dtype=np.int64) * (m * n * size)
    return offsets, _params(la, lb, m, n, k, pack), batch, t


def _params(la, lb, m, n, k, pack):
    return np.array([la[0], lb[0], m, n, k, la[1], lb[1], n, int(pack)], np.int64)


def _bgemm():
    """eager_bgemm.py's kernels ({dtype name: (ctypes function, address)}), or None (not
    built yet: its build started, or it cannot be)."""
    fns = _shims.get("bgemm", False)
    if fns is False:
        fns = eager_builds.start(_shims, "bgemm", _load_bgemm)
    return None if fns is None or fns is eager_builds.PENDING else fns


def _run_records(kernel, recs, t, calls=1):
    """eager_bgemm's kernel over recs, as t chunks on the pool (where t > 1); calls: what
    stats counts (a stack's product is one)."""
    (fn, address), pr, count = kernel, data_pointer(recs), len(recs)
    if t < 2 or not eager_threads.run(address, [pr], count, recs.strides[0], align=1, t=t):
        fn(pr, count)
    stats["calls"] += calls


def _load_bgemm():
    """{dtype name: (ctypes function, address)} of eager_bgemm.py's kernels, or None."""
    from ..codegen import eager_bgemm
    from ..codegen.native import blas
    found = blas.gemm_symbols()
    if not found or blas.shim is None:
        return None
    lib = eager_bgemm.build(found)
    fns = {"code": lib}
    proto = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64)
    for dt in found:
        address = lib.address(eager_bgemm.name(dt))
        fns[dt] = (proto(address), address)
    return fns


def install(enabled=ENABLED):
    """Make ir/np_matmul.py's products run here (enabled) or on NumPy's matmul (not)."""
    np_matmul.set_threaded(matmul if enabled else None)


install()
