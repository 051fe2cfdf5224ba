"""Eager products bound once for a time loop's steps (an LSTM layer's: ir/ops_rnn_layer.py
through compile/eager_steps.py): `bind(a, b, out, beta)` -> a function of the three
addresses computing out = a @ b + beta * out for every step whose operands are laid out as
these, or None (the caller runs matmul).

Why: each step's matmul ran eager_gemm.matmul's checks (~5 us) and, forward, np.add's call
beside a 20-30 us product (batch 32, H 128). Bound, a step is one call on addresses:

- beta 0, on gemm.py's register-blocked kernel (codegen/eager_ogemm.py), C's columns one
  block a thread: OpenBLAS packs B for each product (again per chunk of its split), which
  products this small do not repay (LSTM backward's 32 x 512 x 128: 21 us against the
  shim's 29 at 2 threads; 32 x 128 x 512 on one thread 28 against 36). The kernel's sums
  run k in order: OpenBLAS's bits where K fits its one K block, within rounding past it
  (it sums K in blocks: an LSTM's backward, K = 4H = 512 at H 128, moved the layer's
  gradients by ~2e-7 of their largest entry).
- beta 1 (or where that kernel is not built yet), on eager_gemm's BLAS shim (OpenBLAS's
  chunks on llgrad's threads; on one thread its one call, NumPy's bits): beta 1 adds the
  product into out in OpenBLAS's kernel, one rounding of (product + out), np.add's where K
  fits its one K block.

The caller keeps the operands apart from out; `stats` (eager_gemm's) counts the calls."""
import ctypes

import numpy as np

from ..ir.np_address import data_pointer
from . import eager_builds, eager_threads
from .eager_gemm import _DTYPES, _NO_TRANS, _ROW_MAJOR, ENABLED, _layout, _load, _shims, \
    _threads, stats

_OWN_GRAIN = 32         # columns: a multiple of the own kernel's tile (2 vectors) on any ISA


def bind(a, b, out, beta=0.0):
    """out = a @ b + beta * out for matrices laid out as these (shapes, strides, dtype) as a
    function of the addresses of a, b and out, or None (see the module)."""
    if not ENABLED or not all(type(x) is np.ndarray and x.ndim == 2 and x.flags.aligned
                              for x in (a, b, out)):
        return None
    (m, k), n = a.shape, b.shape[1]
    if b.shape[0] != k or a.dtype != b.dtype or a.dtype not in _DTYPES or \
            out.dtype != a.dtype or out.shape != (m, n) or not out.flags.writeable or \
            m * n * k == 0:
        return None
    size = a.itemsize
    la, lb = _layout(a.strides, m, k, size), _layout(b.strides, k, n, size)
    if la is None or lb is None or \
            _layout(out.strides, m, n, size) != (_NO_TRANS, out.strides[0] // size):
        return None
    if beta == 0:
        own = _bind_own(a, b, out, la, lb)
        if own is not None:
            return own
    fns = _shims.get("shim", False)
    if fns is False:
        fns = eager_builds.start(_shims, "shim", _load)
    if fns is None or fns is eager_builds.PENDING:
        return None
    fn, ta, tb, lda, ldb, ldc = fns[_DTYPES[a.dtype]], la[0], lb[0], la[1], lb[1], \
        out.strides[0] // size

    def product(pa, pb, pc):
        fn(_ROW_MAJOR, ta, tb, m, n, k, 1.0, pa, lda, pb, ldb, beta, pc, ldc)
        stats["calls"] += 1
    return product


def _bind_own(a, b, out, la, lb):
    """bind's product (beta 0) on gemm.py's kernel (codegen/eager_ogemm.py): C's columns in
    one block a thread (each thread's share of B read in place, A packed by each), or None
    where that kernel is not built (yet). The records are filled once: a step writes its
    three addresses into them."""
    fns = _shims.get("ogemm", False)
    if fns is False:
        fns = eager_builds.start(_shims, "ogemm", _load_ogemm)
    if fns is None or fns is eager_builds.PENDING:
        return None
    from ..codegen.eager_ogemm import RECORD_WORDS
    (m, k), n, size = a.shape, b.shape[1], a.itemsize
    parts = max(1, min(_threads(), n // _OWN_GRAIN))
    per = -(-n // parts)
    width = -(-per // _OWN_GRAIN) * _OWN_GRAIN if parts > 1 else n
    parts = -(-n // width)
    # gemm.py's strides: A unit-stride along K (packed) or along M, B along N or along K
    (ars, acs), (brs, bcs) = ((la[1], 1) if la[0] == _NO_TRANS else (1, la[1])), \
        ((lb[1], 1) if lb[0] == _NO_TRANS else (1, lb[1]))
    ldc = out.strides[0] // size
    scratch, recs = [], np.zeros((parts, RECORD_WORDS), np.int64)
    for p in range(parts):
        cols = min(n, (p + 1) * width) - p * width
        sa = np.empty(k * m if ars != 1 and m > 1 else 1, a.dtype)
        sb = np.empty(k * cols if bcs != 1 else 1, a.dtype)
        scratch += [sa, sb]
        recs[p] = (m, cols, k, 0, ars, acs, 0, brs, bcs, 0, ldc, data_pointer(sa),
                   data_pointer(sb))
    b_off = [p * width * bcs * size for p in range(parts)]
    c_off = [p * width * size for p in range(parts)]
    words = (ctypes.c_int64 * recs.size).from_buffer(recs)
    fn, address = fns[_DTYPES[a.dtype]]
    pr, unit = data_pointer(recs), recs.strides[0]

    def product(pa, pb, pc, keep=(recs, scratch)):
        for p in range(parts):
            words[p * RECORD_WORDS + 3] = pa
            words[p * RECORD_WORDS + 6] = pb + b_off[p]
            words[p * RECORD_WORDS + 9] = pc + c_off[p]
        if parts < 2 or not eager_threads.run(address, [pr], parts, unit, align=1, t=parts):
            fn(pr, parts)
        stats["calls"] += 1
    return product


def _load_ogemm():
    """{dtype name: (ctypes function, address)} of eager_ogemm.py's kernels, or None."""
    from ..codegen import eager_ogemm
    try:
        lib = eager_ogemm.build()
    except Exception:           # noqa: BLE001 (an unusual platform: the shim serves)
        return None
    fns = {"code": lib}
    proto = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64)
    for dt in _DTYPES.values():
        address = lib.address(eager_ogemm.name(dt))
        fns[dt] = (proto(address), address)
    return fns
