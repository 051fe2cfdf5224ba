"""Native fork-join over the cores: a loop's outer range split into chunks, a few per thread.

The thread count is one process-wide int64 (`llgrad_num_threads`, published to the JIT
like the BLAS symbols) that native code reads at every parallel loop, so changing it with
`set_num_threads` never recompiles, and cached object files keep working. Its default is
LLGRAD_NUM_THREADS, else the CPUs this process may run on.

API (for emitters):

    parallel_range(fg, n, body, *, work_per_iter=1, grain=1, partials=())

runs outer iterations [0, n) of a loop in `fg` (a group's FuncGen). `body(g, lo, hi, tid)`
emits the loop over [lo, hi) (i64 values) with `g`, a FuncGen whose `g.ptrs[buf]`,
`g.load/store/address/alloca`, `g.sg` and `g.b` work as in fg (every pointer parameter is
`noalias`, so the loops vectorise as before). The body is emitted once into an internal
function that each thread calls with its own chunk; tid is the chunk's index (0..C-1).
T = min(threads, n // grain chunks, work / MIN_WORK_PER_THREAD, ...) threads, where work =
n * work_per_iter (elements times a rough per-element cost): a loop that can never reach
two threads is emitted inline in fg as before (nothing extra at run time), and a bigger
one whose T is 1 at run time calls the body directly (one load and compare). A loop on
T > 1 threads is cut into C = min(T * OVERSPLIT, n // grain, ...) chunks (chunk_count),
which the threads take one at a time. Chunk t is
iterations [t*u//C*grain, (t+1)*u//C*grain) (u = ceil(n/grain)), capped at n: the same
chunks for the same T, so results are deterministic per thread count. The chunks' records
go to `llgrad_parallel_run` (pool.py), which runs them all and returns: the calling thread
runs chunk 0 and whatever chunks no other thread takes, the persistent workers of the
pool (or plain pthreads where there is no pool) take the others while CPUs are free, so
the threads running llgrad code never outnumber the CPUs, however many callers there are.

    Partial(dest, k)

a float64[k] accumulator: `dest` is a pointer in fg to k doubles that must not alias any
buffer the loop touches (a stack slot, say). The body adds its contribution into
`g.ptrs[partial]`: for each thread that is a private zeroed array in the caller's frame
(whole cache lines per thread; still, accumulate in a local g.alloca, which LLVM keeps in
registers, and add it in once after the loop: a store through a pointer parameter in the
loop may stay a store per iteration and block vectorisation); after the join the
helper adds them into dest in tid order, dest[j] = ((dest[j] + p0[j]) + p1[j]) + ...
With one thread the body adds into dest itself (the same result when dest starts at 0).
The partials' total stack size caps T (PARTIAL_STACK_BYTES).

    parallel_loops(fg, ext, body, *, cost=1, partials=(), rows=False)

the same for a normalized loop nest (loops.normalize) of extents ext: it picks the loop
the threads divide (the outermost one with enough iterations for balance, else the one
with the most; the innermost in steps of 64 elements, so vector loops stay full), and
calls body(g, loops, tid), where `with loops() as idx:` opens the chunk's nest. `cost(nodes)`
is the per-element cost of a fused group's nodes, for `cost=`; `thread_cap(...)` says how
many threads a loop may get (1: it is emitted inline).

The body is emitted exactly once (into fg itself when the loop is never threaded). It must
not open another parallel loop (no nesting), and should not call back into Python (a
ctypes callback would take the GIL on every thread and serialise them)."""
from contextlib import ExitStack, contextmanager

from llvmlite import ir

from ...ir.optable import OPS
from ..native.threadcount import COUNT as _COUNT, RUN as _RUN
from .loops import FuncGen, for_range
from .pool import ensure_pool
from .scalar import F64, I1, I8, I32, I64, PTR

MIN_WORK_PER_THREAD = 1 << 15   # elements x cost() per thread: ~8-15 us of work. Handing a
                                # chunk to a pool worker (pool.py) that is spinning costs a
                                # few us: on 2 threads an add of 64K floats took 9.2 us for
                                # 11.7, a tanh + sum of 16K 10.8 for 13.7 (measured); a new
                                # thread per loop cost ~30-50 us here (a VM: LLGRAD_POOL=0)
MAX_THREADS = 256               # bounds the records and partials in the caller's frame
PARTIAL_STACK_BYTES = 1 << 18   # all threads' partial arrays together
SPLIT_UNITS = 16                # a loop with this many chunks balances well enough
OVERSPLIT = 4                   # chunks per thread: the pool hands them out one at a time
                                # (pool.py), so a thread the OS deschedules (a shared
                                # machine) holds back a quarter of its share, not all of
                                # it; on 2 threads with other processes busy, one chunk
                                # per thread made 2 threads slower than 1 (issue 20)
INNER_GRAIN = 64                # innermost-loop chunks: whole vectors (and cache lines)

# a chunk's record: lo, hi, tid, the buffer-pointer array, its partials
_REC = ir.LiteralStructType([I64, I64, I64, PTR, PTR])
_LO, _HI, _TID, _BUFS, _PARTS = range(5)
_REC_BYTES = 40


class Partial:
    """A float64[k] accumulator combined across threads (see the module docstring)."""
    slot = "part"                       # (FuncGen names its parameter after this)

    def __init__(self, dest, k):
        self.dest, self.k = dest, int(k)
        self.padded = -(-self.k // 8) * 8       # whole cache lines per thread


class _Task:
    slot = "task"


def _declare(mod):
    """The module's declarations of the thread-count word and of llgrad_parallel_run
    (which is made resolvable now, before the module can be linked: pool.ensure_pool)."""
    g = mod.globals
    if _COUNT not in g:
        ensure_pool()
        ir.GlobalVariable(mod, I64, name=_COUNT)        # no initializer: external
        ir.Function(mod, ir.FunctionType(ir.VoidType(), [PTR, PTR, I64, I64]), name=_RUN)
    return g[_COUNT], g[_RUN]


def _opaque(p):
    """An alloca as the opaque `ptr` it is in LLVM (llvmlite types it, and then refuses to
    store an i64 or a ptr through a GEP of it; bitcast to ptr is a no-op it drops)."""
    p.type = PTR
    return p


def _field(b, rec, k):
    return b.gep(rec, [ir.Constant(I32, 0), ir.Constant(I32, k)], inbounds=True,
                 source_etype=_REC)


def _i64(x):
    return ir.Constant(I64, x)


def thread_cap(n, work_per_iter=1, grain=1, partials=()):
    """The most threads a loop of n outer iterations may use (1: it runs inline)."""
    return max(1, min(chunk_cap(n, grain, partials), n * work_per_iter // MIN_WORK_PER_THREAD))


def chunk_cap(n, grain=1, partials=()):
    """The most chunks a loop of n outer iterations may be split into."""
    units = -(-n // grain) if n > 0 else 0
    cap = min(MAX_THREADS, units)
    pbytes = 8 * sum(p.padded for p in partials)
    if pbytes:
        cap = min(cap, PARTIAL_STACK_BYTES // pbytes)
    return max(1, cap)


def chunk_count(threads, n, grain=1, partials=()):
    """Chunks of a loop run on `threads` threads (> 1): OVERSPLIT per thread, as many as
    the loop has units and the partials' stack allows (deterministic per thread count)."""
    return max(threads, min(threads * OVERSPLIT, chunk_cap(n, grain, partials)))


def parallel_range(fg, n, body, *, work_per_iter=1, grain=1, partials=()):
    """Emit iterations [0, n) of a loop over the threads (see the module docstring)."""
    partials = list(partials)
    cap = thread_cap(n, work_per_iter, grain, partials)
    # (a module shared between sizes decides at run time: its caps are parameters there)
    by_size = getattr(fg.module, "threads_by_size", False)
    if cap == 1 and not by_size:
        # never worth a thread: the loop as it always was
        for p in partials:
            fg.ptrs[p] = p.dest
        try:
            body(fg, _i64(0), _i64(n), _i64(0))
        finally:
            for p in partials:
                del fg.ptrs[p]
        return
    mod, b = fg.module, fg.b
    count, run = _declare(mod)
    bufs = [k for k in fg.ptrs if not isinstance(k, (Partial, _Task))]
    task = _Task()
    # the body: every pointer a noalias parameter, its chunk read from the task record
    g = FuncGen(mod, mod.get_unique_name(fg.fn.name + ".par"), bufs + [task] + partials,
                bases=fg.bases)
    rec = g.ptrs[task]
    body(g, *(g.b.load(_field(g.b, rec, k), typ=I64) for k in (_LO, _HI, _TID)))
    g.finish()
    worker = _worker(mod, g.fn, len(bufs), partials)

    if by_size:     # (the caps computed at run time from n, which is a parameter there: a
        # saturated min or a floor of n precomputed here would be a constant at two sizes
        # and differ at a third)
        most = _least(b, _units(b, n, grain), _i64(chunk_cap(1 << 62, 1, partials)))
        work = b.udiv(b.mul(_i64(n), _i64(work_per_iter)), _i64(MIN_WORK_PER_THREAD))
        cap = _least(b, most, work)
        cap = b.select(b.icmp_signed("<", cap, _i64(1)), _i64(1), cap)
    else:
        cap, most = _i64(cap), _i64(chunk_cap(n, grain, partials))
    nt = b.load_atomic(count, "monotonic", 8, typ=I64)
    t = b.select(b.icmp_signed("<", nt, _i64(1)), _i64(1), nt)
    t = b.select(b.icmp_signed(">", t, cap), cap, t, name="nthreads")
    with b.if_else(b.icmp_signed("<=", t, _i64(1))) as (serial, fork):
        with serial:                    # one thread: the body over everything, in place
            one = _opaque(fg.alloca(_REC, name="task"))
            for k, v in ((_LO, 0), (_HI, n), (_TID, 0)):
                b.store(_i64(v), _field(b, one, k))
            b.call(g.fn, [fg.ptrs[k] for k in bufs] + [one] + [p.dest for p in partials])
        with fork:                      # chunks: min(t * OVERSPLIT, chunk_cap), >= t
            c = b.mul(t, _i64(OVERSPLIT))
            c = b.select(b.icmp_signed(">", c, most), most, c)
            c = b.select(b.icmp_signed("<", c, t), t, c, name="nchunks")
            _fork_join(fg, c, n, grain, bufs, partials, worker, run)


def _least(b, x, y):
    return b.select(b.icmp_signed("<", x, y), x, y)


def _units(b, n, grain):
    """ceil(n / grain) as code (a constant where the module is not shared between sizes)."""
    if not getattr(b.module, "threads_by_size", False):
        return _i64(-(-n // grain))
    return b.udiv(b.add(_i64(n), _i64(grain - 1)), _i64(grain))


def _worker(mod, body_fn, nbufs, partials):
    """`ptr worker(ptr rec)` (a pthread start routine): its chunk of the body."""
    fn = ir.Function(mod, ir.FunctionType(PTR, [PTR]), name=body_fn.name + ".worker")
    fn.linkage = "internal"
    fn.attributes.add("nounwind")
    rec = fn.args[0]
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    arr = b.load(_field(b, rec, _BUFS), typ=PTR)
    args = [b.load(b.gep(arr, [_i64(k)], inbounds=True, source_etype=PTR), typ=PTR)
            for k in range(nbufs)]
    parts = b.load(_field(b, rec, _PARTS), typ=PTR)
    off = 0
    for p in partials:
        args.append(b.gep(parts, [_i64(off)], inbounds=True, source_etype=F64))
        off += p.padded
    b.call(body_fn, [*args[:nbufs], rec, *args[nbufs:]])
    b.ret(ir.Constant(PTR, None))
    return fn


def _fork_join(fg, t, n, grain, bufs, partials, worker, run):
    """T records and partial arrays on the stack, every chunk run (llgrad_parallel_run),
    combine. The T-sized allocas are freed with stackrestore at the end rather than at
    return (the group's function is inlined into its caller, maybe a control-flow region's
    loop)."""
    b = fg.b
    mod = fg.module
    save = b.call(_intrinsic(mod, "llvm.stacksave.p0", PTR, []), [])
    arr = _opaque(fg.alloca(ir.ArrayType(PTR, max(len(bufs), 1)), name="bufs"))
    for k, buf in enumerate(bufs):
        b.store(fg.ptrs[buf], b.gep(arr, [_i64(k)], inbounds=True, source_etype=PTR))
    recs = _opaque(b.alloca(_REC, size=t, name="recs"))     # T of them: sized at run time
    per = sum(p.padded for p in partials)
    parts = ir.Constant(PTR, None)
    if per:
        parts = _opaque(b.alloca(F64, size=b.mul(t, _i64(per)), name="partials"))
        parts.align = 64
        b.call(mod.declare_intrinsic("llvm.memset", [PTR, I64]),
               [parts, ir.Constant(I8, 0), b.mul(t, _i64(per * 8)), ir.Constant(I1, 0)])
    units = _units(b, n, grain)

    def bound(i):                       # min(n, i * units // T * grain)
        x = b.mul(b.udiv(b.mul(i, units), t), _i64(grain))
        return b.select(b.icmp_signed("<", x, _i64(n)), x, _i64(n))

    with for_range(b, 0, t, name="rec") as i:
        r = b.gep(recs, [i], inbounds=True, source_etype=_REC)
        b.store(bound(i), _field(b, r, _LO))
        b.store(bound(b.add(i, _i64(1))), _field(b, r, _HI))
        b.store(i, _field(b, r, _TID))
        b.store(arr, _field(b, r, _BUFS))
        b.store(b.gep(parts, [b.mul(i, _i64(per))], inbounds=True, source_etype=F64)
                if per else parts, _field(b, r, _PARTS))
    b.call(run, [worker, recs, t, _i64(_REC_BYTES)])   # (chunk 0 among them, here)
    off = 0
    for p in partials:                  # dest += p0, += p1, ... (tid order: deterministic)
        with for_range(b, 0, p.k, name="comb") as j:
            at = b.gep(p.dest, [j], inbounds=True, source_etype=F64)
            with for_range(b, 0, t, name="combt") as i:
                k = b.add(b.add(b.mul(i, _i64(per)), _i64(off)), j)
                x = b.load(b.gep(parts, [k], inbounds=True, source_etype=F64), typ=F64)
                b.store(b.fadd(b.load(at, typ=F64), x), at)
        off += p.padded
    b.call(_intrinsic(mod, "llvm.stackrestore.p0", ir.VoidType(), [PTR]), [save])


def _intrinsic(mod, name, ret, args):
    fn = mod.globals.get(name)
    return fn if fn is not None else ir.Function(mod, ir.FunctionType(ret, args), name=name)


# ---- loop nests -------------------------------------------------------------------------
def cost(nodes):
    """A rough per-element cost of computing nodes, in units of a memory-bound add (each
    op's OpDef.cost: a transcendental one declares 4, as a vectorised tanh over 64K floats
    takes ~2.5x as long as an add, which is bound by memory like a fused chain's every load
    and store)."""
    return max(1, sum(OPS[n.op].cost if n.op in OPS else 1 for n in nodes))


def split_dim(ext, by_size=False, rows=False):
    """(d, grain): the loop of a normalized nest the threads divide, in steps of grain
    (by_size: code shared between sizes, where the choice may not depend on them: the
    outermost; rows: each innermost iteration is a whole row or channel of work, not one
    element of a vector loop, so it is divided one iteration at a time)."""
    last = len(ext) - 1
    inner = 1 if rows else INNER_GRAIN
    if by_size:
        return 0, (inner if last == 0 else 1)
    units = [-(-n // inner) if k == last else n for k, n in enumerate(ext)]
    for k, u in enumerate(units):
        if u >= SPLIT_UNITS:
            break
    else:
        k = max(range(len(ext)), key=units.__getitem__)
    return k, (inner if k == last else 1)


def parallel_loops(fg, ext, body, *, cost=1, partials=(), hints=None, rows=False):
    """The nest `ext` over the threads: body(g, loops, tid), `with loops() as idx:`;
    hints: loop metadata (loop_hints) for the innermost loop; rows: each iteration of the
    nest is a row's (a channel's) passes, not an element (split_dim)."""
    ext = list(ext)
    if not ext:                         # a scalar: one iteration, never threaded
        ext_d, d, grain = 1, None, 1
    else:
        d, grain = split_dim(ext, getattr(fg.module, "threads_by_size", False), rows)
        ext_d = ext[d]
    numel = 1
    for x in ext:
        numel *= x
    per = numel // ext_d * cost if ext_d else 0

    def rbody(g, lo, hi, tid):
        @contextmanager
        def loops():
            with ExitStack() as stack:
                yield [stack.enter_context(for_range(
                    g.b, lo if k == d else 0, hi if k == d else x, name=f"i{k}",
                    hints=hints if k == len(ext) - 1 else None))
                    for k, x in enumerate(ext)]
        body(g, loops, tid)

    parallel_range(fg, ext_d, rbody, work_per_iter=per, grain=grain, partials=partials)
