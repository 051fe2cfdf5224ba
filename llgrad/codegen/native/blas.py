"""The BLAS that NumPy's wheel ships (OpenBLAS with 64-bit integers), found with ctypes and
made callable from JIT code with `llvm.add_symbol`. `LLGRAD_BLAS=0` disables it (float
matmuls then call llgrad's own GEMM, gemm.py).

Kernels call the gemm routine by its own name (the disk cache holds no address), and that
name resolves to a shim with the same signature (built once, kept in the disk cache):

- The product is split into C's rows (or columns, when it has more of them) in chunks of
  16 rows (64 columns), at most OVERSPLIT per llgrad thread (one a thread where that makes
  them equal and OVERSPLIT's would not) and one per 65536 * 4 multiply-adds (OpenBLAS's own
  threshold for a second thread), and the chunks run on
  llgrad's thread pool (`llgrad_parallel_run`, lowerings/pool.py), each an OpenBLAS call
  on one thread, the threads taking them one at a time (a thread the OS deschedules on a
  busy machine holds back one small chunk, not half the product: issue 20). The chunks
  depend on nothing but the thread count and the shape, so results are deterministic for
  a given count, as every other loop's.
- While any kernel is inside the shim, OpenBLAS's own thread count is 1 (it is put back
  when the last one leaves; `set_num_threads` meanwhile only records the count to put
  back), so OpenBLAS never starts threads of its own under a kernel.
- `llgrad_serial.` + the routine's name is the same call never split (OpenBLAS on one
  thread, as above): for a batch of small products whose batch is what the threads divide
  (ops_matmul.py). (Convolution's per-image products keep the splitting entry: a chunk's
  product split again lets an idle thread take part of it, and measured the 2-thread CPU
  split of a conv forward + weight gradient 50/50 with it, 58/42 without.)

Why: OpenBLAS's threads are a second pool whose jobs wait for each other, spinning. On
this 2-core machine a 256^3 product took 41 ms on OpenBLAS's 2 threads against 1.4 ms on
one when another process used a core (its other thread was not scheduled), and 4 Python
threads calling a compiled MLP took 3-5x as long as the same calls one after the other. A
chunk is independent of the others: the pool gives it to a worker only while a CPU is free
(else the caller runs it), so concurrent callers and a busy machine slow a product down
no more than its work. NumPy's own matmuls outside kernels keep OpenBLAS's threads (the
count `set_num_threads` sets), except while a kernel is in the shim. Where the shim cannot
be built, kernels call OpenBLAS directly, as before."""
import ctypes
import os
import threading

from llvmlite import ir

# (the pool the shims run chunks on; its import publishes the cpus.py words the pool's
# code links against, before any shim is linked)
from ..lowerings.pool import ensure_pool
from . import disk_only, jit, keys
from .openblas import GETTERS, SETTERS, libraries, thread_setter
from .threadcount import COUNT as _COUNT
from .threadcount import RUN as _RUN

_found = None
_SHIM = {"float32": "llgrad_blas_sgemm", "float64": "llgrad_blas_dgemm"}
SERIAL = "llgrad_serial."                   # + the routine's name: one unsplit call (below)
_REAL = "llgrad_blas_real."                  # + the routine's name: what the shim calls
CHUNK_WORK = 65536.0 * 4                    # multiply-adds per chunk, at least
OVERSPLIT = 2                               # chunks per thread, at most (see below: each
                                            # chunk packs B again: fewer than loops have)
ROW_GRAIN, COL_GRAIN = 16, 64
ROW_MAJOR, NO_TRANS = 101, 111
shim = None                                 # the shims' Compiled, when built

# native memory the shims share with set_num_threads: a pthread_mutex_t (all zeros:
# unlocked), then how many kernels are inside the shim and the OpenBLAS count to put back
_mem = ctypes.create_string_buffer(192)
_MUTEX = -(-ctypes.addressof(_mem) // 64) * 64
_users = ctypes.c_int64.from_address(_MUTEX + 64)
_saved = ctypes.c_int64.from_address(_MUTEX + 72)
_libc = ctypes.CDLL(None)
_lock_fn = _libc.pthread_mutex_lock
_unlock_fn = _libc.pthread_mutex_unlock
for _f in (_lock_fn, _unlock_fn):
    _f.argtypes = [ctypes.c_void_p]

# (symbol, width of its integer arguments), per dtype, most specific first
_CANDIDATES = {
    "float32": [("scipy_cblas_sgemm64_", 64), ("cblas_sgemm64_", 64), ("cblas_sgemm", 32)],
    "float64": [("scipy_cblas_dgemm64_", 64), ("cblas_dgemm64_", 64), ("cblas_dgemm", 32)],
}


# one search at a time: another thread waits for its symbols to be given to the JIT (it
# took "none found" from a search under way, or loaded a cached object calling a routine not
# yet given, which LLVM aborts the process on); the searching thread's own shim build, asking
# again, is told none (re-entrant lock)
_search_lock = threading.RLock()
_searching = []


def gemm_symbols():
    """{dtype: (symbol, int_bits)} for the gemm routines found (empty when none is)."""
    global _found
    if _found is None:
        with disk_only.held(_search_lock):
            if _found is None:
                if _searching:
                    return {}
                _searching.append(True)
                try:
                    _found = _search() if os.environ.get("LLGRAD_BLAS", "1") != "0" else {}
                finally:
                    _searching.clear()
    return _found


def _search():
    for path in libraries():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        found, real = {}, {}
        for dt, cands in _CANDIDATES.items():
            for sym, bits in cands:
                try:
                    fn = getattr(lib, sym)
                except AttributeError:
                    continue
                real[sym] = ctypes.cast(fn, ctypes.c_void_p).value
                found[dt] = (sym, bits)
                break
        if found:
            _found_lib.append(lib)         # keep it loaded
            getter = next((getattr(lib, g) for g in GETTERS if hasattr(lib, g)), None)
            setter = next((getattr(lib, s) for s in SETTERS if hasattr(lib, s)), None)
            shims = _shims(found, real, getter, setter) if getter and setter else None
            for dt, (sym, _) in found.items():
                jit.add_symbol(sym, shims[dt][0] if shims else real[sym])
                jit.add_symbol(SERIAL + sym, shims[dt][1] if shims else real[sym])
            return found
    return {}


def _address(fn):
    return ctypes.cast(fn, ctypes.c_void_p).value


def _shims(found, real, getter, setter):
    """{dtype: (address of the shim, of its serial entry)} (see the module docstring), or
    None if they cannot be built."""
    try:
        ensure_pool()                       # (llgrad_parallel_run, llgrad_num_threads)
        for sym, address in real.items():
            jit.add_symbol(_REAL + sym, address)
        jit.add_symbol("llgrad_blas_get_num_threads", _address(getter))
        jit.add_symbol("llgrad_blas_set_num_threads", _address(setter))
        jit.add_symbol("llgrad_blas_mutex", _MUTEX)
        jit.add_symbol("llgrad_blas_state", _MUTEX + 64)
        for name in ("pthread_mutex_lock", "pthread_mutex_unlock"):
            jit.add_symbol("llgrad_blas_" + name, _address(getattr(_libc, name)))
        names = [n for dt in sorted(found) for n in (_SHIM[dt], _SHIM[dt] + ".serial")]
        desc = ";".join(f"{dt}={sym}/{bits}" for dt, (sym, bits) in sorted(found.items()))
        key = keys.key_for("llgrad blas shims",
                           f"{desc};rows={ROW_GRAIN};cols={COL_GRAIN};work={CHUNK_WORK};"
                           f"oversplit={OVERSPLIT};even;serial")
        global shim
        # (at -O0: a shim's own work per product is a few dozen instructions and a mutex
        # beside the BLAS call, so optimising buys nothing measurable, and O3 took ~60 ms of
        # CPU, a tenth of a cold process's first build)
        shim = jit.load_private(key, names) or \
            jit.compile_private(_shim_module(found), names, key=key)
        return {dt: (shim.address(_SHIM[dt]), shim.address(_SHIM[dt] + ".serial"))
                for dt in found}
    except Exception:       # noqa: BLE001 (an unusual platform: call OpenBLAS directly)
        return None


def _shim_module(found):
    i32, i64, f64, ptr = ir.IntType(32), ir.IntType(64), ir.DoubleType(), ir.PointerType()
    c32 = lambda v: ir.Constant(i32, v)             # noqa: E731
    c64 = lambda v: ir.Constant(i64, v)             # noqa: E731
    mod = jit.new_module("llgrad_blas_shims")

    def external(name, ty):
        g = ir.GlobalVariable(mod, ty, name)
        g.type = ptr
        return g

    count = external(_COUNT, i64)
    mutex = external("llgrad_blas_mutex", ir.IntType(8))
    state = external("llgrad_blas_state", i64)      # [users, saved]
    run = ir.Function(mod, ir.FunctionType(ir.VoidType(), [ptr, ptr, i64, i64]), _RUN)
    getter = ir.Function(mod, ir.FunctionType(i32, []), "llgrad_blas_get_num_threads")
    setter = ir.Function(mod, ir.FunctionType(ir.VoidType(), [i32]),
                         "llgrad_blas_set_num_threads")
    lock, unlock = (ir.Function(mod, ir.FunctionType(i32, [ptr]), "llgrad_blas_" + n)
                    for n in ("pthread_mutex_lock", "pthread_mutex_unlock"))

    def word(b, k):
        p = b.gep(state, [c64(k)], source_etype=i64)
        p.type = ptr
        return p

    # enter(): the first kernel in sets OpenBLAS to 1 thread; leave(): the last one out
    # puts back the count it found (or the one set_num_threads recorded meanwhile)
    enter = ir.Function(mod, ir.FunctionType(ir.VoidType(), []), "llgrad_blas_enter")
    leave = ir.Function(mod, ir.FunctionType(ir.VoidType(), []), "llgrad_blas_leave")
    for fn, first in ((enter, True), (leave, False)):
        fn.linkage = "internal"
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        b.call(lock, [mutex])
        users = b.load(word(b, 0), typ=i64)
        now = b.add(users, c64(1)) if first else b.sub(users, c64(1))
        b.store(now, word(b, 0))
        with b.if_then(b.icmp_signed("==", users if first else now, c64(0))):
            if first:
                had = b.call(getter, [])
                b.store(b.sext(had, i64), word(b, 1))
                with b.if_then(b.icmp_signed("!=", had, c32(1))):
                    b.call(setter, [c32(1)])
            else:
                had = b.trunc(b.load(word(b, 1), typ=i64), i32)
                with b.if_then(b.icmp_signed("!=", had, c32(1))):
                    b.call(setter, [had])
        b.call(unlock, [mutex])
        b.ret_void()

    rec_ty = ir.LiteralStructType([i64, i64, ptr, i64])         # lo, hi, the call, (pad)
    for dt, (sym, bits) in sorted(found.items()):
        it = i64 if bits == 64 else i32
        ft = ir.FloatType() if dt == "float32" else f64
        size = 4 if dt == "float32" else 8
        params = [i32, i32, i32, it, it, it, ft, ptr, it, ptr, it, ft, ptr, it]
        fnty = ir.FunctionType(ir.VoidType(), params)
        real = ir.Function(mod, fnty, _REAL + sym)
        call_ty = ir.LiteralStructType(params + [i32])              # the arguments, by rows?

        # a chunk: rows (or columns) [lo, hi) of C
        chunk = ir.Function(mod, ir.FunctionType(ptr, [ptr]), _SHIM[dt] + ".chunk")
        chunk.linkage = "internal"
        b = ir.IRBuilder(chunk.append_basic_block("entry"))
        rec = chunk.args[0]

        def field(b, p, ty, k):
            q = b.gep(p, [c32(0), c32(k)], inbounds=True, source_etype=ty)
            q.type = ptr
            return q

        lo = b.load(field(b, rec, rec_ty, 0), typ=i64)
        hi = b.load(field(b, rec, rec_ty, 1), typ=i64)
        args_p = b.load(field(b, rec, rec_ty, 2), typ=ptr)
        a = [b.load(field(b, args_p, call_ty, k), typ=t) for k, t in enumerate(params)]
        by_rows = b.load(field(b, args_p, call_ty, len(params)), typ=i32)
        ta, tb, lda, ldb, ldc = a[1], a[2], a[8], a[10], a[13]

        def at(p, elems):               # p + elems * size bytes
            return b.gep(p, [b.mul(elems, c64(size))], inbounds=True,
                         source_etype=ir.IntType(8))

        def wide(v):
            return v if it == i64 else b.sext(v, i64)

        def narrow(v):
            return v if it == i64 else b.trunc(v, i32)

        n_sub = narrow(b.sub(hi, lo))
        with b.if_else(b.icmp_signed("!=", by_rows, c32(0))) as (rows, cols):
            with rows:                  # op(A) rows lo.., C rows lo..
                step = b.select(b.icmp_signed("==", ta, c32(NO_TRANS)), wide(lda), c64(1))
                sub_a = at(a[7], b.mul(lo, step))
                sub_c = at(a[12], b.mul(lo, wide(ldc)))
                b.call(real, a[:3] + [n_sub] + a[4:7] + [sub_a] + a[8:12] + [sub_c, a[13]])
            with cols:                  # op(B) columns lo.., C columns lo..
                step = b.select(b.icmp_signed("==", tb, c32(NO_TRANS)), c64(1), wide(ldb))
                sub_b = at(a[9], b.mul(lo, step))
                sub_c = at(a[12], lo)
                b.call(real, a[:4] + [n_sub] + a[5:9] + [sub_b] + a[10:12] + [sub_c, a[13]])
        b.ret(ir.Constant(ptr, None))

        fn = ir.Function(mod, fnty, _SHIM[dt])
        args = list(fn.args)
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        m, n, k = (wide(v) for v in args[3:6])
        by_rows = b.icmp_signed(">=", m, n)
        ext = b.select(by_rows, m, n)
        grain = b.select(by_rows, c64(ROW_GRAIN), c64(COL_GRAIN))
        units = b.sdiv(b.add(ext, b.sub(grain, c64(1))), grain)
        work = b.fdiv(b.fmul(b.fmul(b.sitofp(m, f64), b.sitofp(n, f64)), b.sitofp(k, f64)),
                      ir.Constant(f64, CHUNK_WORK))
        # (the chunks depend on the thread count and the shape only, not on how many
        # CPUs are free now: OpenBLAS may take another path for another chunk height)
        nt = b.load_atomic(count, "monotonic", 8, typ=i64)
        t = b.mul(nt, c64(OVERSPLIT))
        t = b.select(b.icmp_signed("<=", nt, c64(1)), c64(1), t)
        t = b.select(b.icmp_signed("<", units, t), units, t)
        t = b.select(b.fcmp_ordered("<", work, b.sitofp(t, f64)), b.fptosi(work, i64), t)
        # one chunk a thread where that makes them equal and OVERSPLIT's count would not
        # (6 column grains: 2 of 3, not 64/128/64/128 columns, whose narrow chunks each
        # pack all of A again: a 128x512 @ 512x384 weight gradient ran 1.1x faster on 2
        # threads, against 1.6x for 512 columns)
        def at_least_1(v):          # (a divisor: t is 0 where work < 1)
            return b.select(b.icmp_signed(">", v, c64(1)), v, c64(1))
        uneven = b.icmp_signed("!=", b.srem(units, at_least_1(t)), c64(0))
        by_thread = b.icmp_signed("==", b.srem(units, at_least_1(nt)), c64(0))
        fewer = b.and_(b.icmp_signed(">", t, nt), b.icmp_signed(">", nt, c64(1)))
        t = b.select(b.and_(uneven, b.and_(by_thread, fewer)), nt, t)
        t = b.select(b.icmp_signed("==", args[0], c32(ROW_MAJOR)), t, c64(1))
        b.call(enter, [])
        with b.if_else(b.icmp_signed("<=", t, c64(1))) as (one, many):
            with one:
                b.call(real, args)
            with many:
                call = b.alloca(call_ty)
                for j, v in enumerate(args):
                    b.store(v, field(b, call, call_ty, j))
                b.store(b.zext(by_rows, i32), field(b, call, call_ty, len(params)))
                recs = b.alloca(rec_ty, size=t)
                recs.type = ptr
                with _for(b, t) as j:   # chunk j: [j*units//t*grain, (j+1)*units//t*grain)
                    r = b.gep(recs, [j], inbounds=True, source_etype=rec_ty)
                    r.type = ptr

                    def bound(i):
                        x = b.mul(b.sdiv(b.mul(i, units), t), grain)
                        return b.select(b.icmp_signed("<", x, ext), x, ext)
                    b.store(bound(j), field(b, r, rec_ty, 0))
                    b.store(bound(b.add(j, c64(1))), field(b, r, rec_ty, 1))
                    b.store(call, field(b, r, rec_ty, 2))
                b.call(run, [chunk, recs, t, c64(32)])
        b.call(leave, [])
        b.ret_void()

        serial = ir.Function(mod, fnty, _SHIM[dt] + ".serial")    # one call, never split
        b = ir.IRBuilder(serial.append_basic_block("entry"))
        b.call(enter, [])
        b.call(real, list(serial.args))
        b.call(leave, [])
        b.ret_void()
    return mod


class _for:
    """for (j = 0; j < n; j++) over an IRBuilder: `with _for(b, n) as j:`."""

    def __init__(self, b, n):
        self.b, self.n = b, n

    def __enter__(self):
        b = self.b
        self.pre = b.block
        self.head = b.append_basic_block("for.head")
        self.body = b.append_basic_block("for.body")
        self.done = b.append_basic_block("for.done")
        b.branch(self.head)
        b.position_at_end(self.head)
        self.j = b.phi(ir.IntType(64))
        self.j.add_incoming(ir.Constant(ir.IntType(64), 0), self.pre)
        b.cbranch(b.icmp_signed("<", self.j, self.n), self.body, self.done)
        b.position_at_end(self.body)
        return self.j

    def __exit__(self, *exc):
        b = self.b
        self.j.add_incoming(b.add(self.j, ir.Constant(ir.IntType(64), 1)), b.block)
        b.branch(self.head)
        b.position_at_end(self.done)


_found_lib = []


def _reset():
    global _found
    _found = None


def set_num_threads(n):
    """Set the thread count of NumPy's OpenBLAS (what NumPy's own matmuls use too); True
    if the library offers the call. Small matrices run faster on one thread. (While a
    kernel is inside the shim, the count is recorded and set when the last one leaves.)"""
    fn = thread_setter()
    if fn is None:
        return False
    _lock_fn(_MUTEX)
    try:
        if _users.value > 0:
            _saved.value = int(n)
        else:
            fn(int(n))
    finally:
        _unlock_fn(_MUTEX)
    return True


def _after_fork_in_child():
    global _search_lock
    _search_lock = threading.RLock()     # (a thread of the parent may have been searching)
    _searching.clear()
    ctypes.memset(_MUTEX, 0, 64)         # (a thread of the parent may have held it)
    if _users.value > 0:                 # (kernels of the parent's threads were inside)
        _users.value = 0
        set_num_threads(_saved.value)


if hasattr(os, "register_at_fork"):
    # the shim's mutex is held across a fork: a thread leaving the shim restarts OpenBLAS's
    # threads (its count put back), and between OpenBLAS's fork handler and the fork that left
    # the child an OpenBLAS waiting forever for threads it did not have (ctypes lets the GIL
    # go while this waits; a thread holds the mutex for a few native instructions)
    os.register_at_fork(before=lambda: _lock_fn(_MUTEX),
                        after_in_parent=lambda: _unlock_fn(_MUTEX),
                        after_in_child=_after_fork_in_child)
