"""The runtime behind parallel loops (parallel.py): `llgrad_parallel_run(fn, recs, t,
stride)` runs fn(recs + i * stride) for every chunk i in [0, t) and returns once all have
run. Kernels call it by name, so cached object code finds whichever of the two
implementations below this process has (`ensure_pool` makes the symbol resolvable before
a threaded kernel is compiled or loaded).

The pool (Linux x86-64): persistent worker threads, so a chunk costs a few microseconds to
hand over rather than a thread's creation (~30-50 us in a VM: clone, a stack, waking an
idle vCPU; as much as a loop over 300K floats takes).

    slot (64 bytes, one cache line each): state, the job it was given
    state: EMPTY (no worker) -> CLAIMED (a caller posts a job) -> READY -> RUNNING (the
           worker took it) -> DONE -> IDLE (the caller collected it) -> CLAIMED -> ...;
           READY -> IDLE when the caller takes the job back before a worker started it
    job (on the caller's stack): fn, recs, stride, t, `next`, the next chunk to run, and
         the caller's MXCSR: a worker runs the chunks under its control bits (flushing
         subnormals or not: set_flush_denormal), as the caller runs its own

- A call posts the job to at most min(t, thread count)-1 workers (t chunks may be more
  than the threads: parallel.OVERSPLIT), each only while a CPU is free: it reserves
  one in `llgrad_active_threads` (native/cpus.py: the threads running llgrad code now,
  callers inside kernels included) by a compare-and-swap that keeps it <= the CPUs. An
  IDLE slot's worker is woken (futex); an EMPTY slot gets a worker started (a pthread, for
  good); with no slot or no CPU left, nothing more is posted.
- The caller runs chunk 0, then takes chunks from `next` (an atomic add) until none is
  left, as every worker it posted to does: who runs a chunk changes nothing (its range and
  its partials are its own), so results are deterministic for a given thread count.
- Then it collects each slot it posted to: one whose worker has not started yet is taken
  back (READY -> IDLE, and its CPU released), one running is waited for. A worker, when no
  chunk is left, releases its CPU, marks DONE and wakes the caller.
- Waiting (a worker for a job, a caller for a worker) spins a while on the state (~1 ms of
  `pause`: pool_spin.py) only while a CPU is free (active < CPUs for a worker, <= for a
  caller, whose own CPU is counted), and sleeps on it (futex) at once otherwise: concurrent
  callers share one pool, never run more llgrad threads than CPUs (beyond that a caller
  runs its own chunks), and nobody spins while another caller waits for a CPU.
- Memory order: the job is written before the release store of READY that the worker's
  acquire CAS reads; a worker's chunks' results before DONE (release), read by the caller
  (acquire).
- After os.fork the child has no workers: every slot is reset to EMPTY (register_at_fork).

Plain threads (elsewhere, with LLGRAD_POOL=0, or if building the pool fails): t-1
pthreads per call (each while a CPU is free, as above), chunk 0 on the caller, and a chunk
whose thread did not start run by the caller after its own."""
import ctypes
import os
import platform
import threading

from llvmlite import ir

from ..native import cpus as _cpus
from ..native import jit, keys
from ..native.threadcount import RUN as _RUN
from ..native.threadcount import libc_function as _libc_function
from . import pool_spin
from .loops import for_range
from .plain_threads import CHUNK as _CHUNK
from .plain_threads import PLAIN_NAME as _PLAIN_NAME
from .plain_threads import Callee as _Callee
from .plain_threads import CpuBudget as _Gen
from .plain_threads import c as _c
from .plain_threads import plain_module
from .plain_threads import run_type as _run_type
from .plain_threads import thread_count as _thread_count
from .scalar import I32, I64, PTR

SLOTS = 64
EMPTY, CLAIMED, READY, DONE, IDLE, RUNNING = 0, 1, 2, 3, 4, 5
_SYS_FUTEX, _WAIT, _WAKE = 202, 128, 129        # x86-64; FUTEX_*_PRIVATE
_SLOT = ir.LiteralStructType([I32, I32, PTR, ir.ArrayType(I64, 6)])     # 64 bytes
_JOB = ir.LiteralStructType([PTR, PTR, I64, I64, I64, I64])     # fn, recs, stride, t,
_J_FN, _J_RECS, _J_STRIDE, _J_T, _J_NEXT, _J_CSR = range(6)     # next, the caller's MXCSR
# MXCSR's control bits (exception masks, rounding, flush-to-zero, denormals-are-zero): a
# worker runs a job's chunks under its caller's (set_flush_denormal), not its own
_CSR_CONTROL = 0xFFC0
_NAMES = ("llgrad_pool_run", "llgrad_pool_worker", "llgrad_pool_slots_address",
          "llgrad_pool_pause")
_REAL_CREATE = "llgrad_real_pthread_create"     # (the pool's own: a test may replace it)

_lock = threading.Lock()
# the pool's and the plain runtime's code (kept for good: workers run the pool's for as
# long as the process lives), the slots' address, and the JIT given the symbol
_state = {"lib": None, "plain": None, "slots": 0, "engine": None}


def _store_release(b, value, ptr):
    """An atomic release store (IRBuilder.store_atomic wants a typed pointer)."""
    b._insert(ir.instructions.StoreAtomicInstr(b.block, value, ptr, "release", 4))


class _PoolGen(_Gen):
    def __init__(self, mod):
        super().__init__(mod)
        arr = ir.ArrayType(_SLOT, SLOTS)
        self.slots = ir.GlobalVariable(mod, arr, name="llgrad_pool_slots")
        self.slots.initializer = ir.Constant(arr, None)
        self.slots.align = 64
        self.slots.linkage = "internal"
        self.slots.type = PTR           # (opaque, as LLVM has it: see parallel._opaque)
        self.syscall = ir.Function(mod, ir.FunctionType(I64, [I64], var_arg=True), "syscall")
        self.pause = ir.Function(mod, ir.FunctionType(ir.VoidType(), []),
                                 "llvm.x86.sse2.pause")
        self.create = ir.Function(mod, ir.FunctionType(I32, [PTR, PTR, PTR, PTR]),
                                  _REAL_CREATE)
        self.reserve_fn = self.reserve()
        self.spins, = _cpus.declare(mod, (_cpus.SPINS,))
        self.csr_fns = [ir.Function(mod, ir.FunctionType(ir.VoidType(), [PTR]),
                                    f"llvm.x86.sse.{n}mxcsr") for n in ("st", "ld")]

    def adopt_csr(self, b, want, csr):
        """This thread's MXCSR control bits set to want's (csr: an i32 slot), where they
        differ (ldmxcsr is slow-ish; a flag bit never differs it alone)."""
        b.call(self.csr_fns[0], [csr])
        cur = b.load(csr, typ=I32)
        mask = ir.Constant(I32, _CSR_CONTROL)
        with b.if_then(b.icmp_unsigned("!=", b.and_(cur, mask), b.and_(want, mask))):
            keep = b.and_(cur, ir.Constant(I32, ~_CSR_CONTROL & 0xFFFFFFFF))
            b.store(b.or_(keep, b.and_(want, mask)), csr)
            b.call(self.csr_fns[1], [csr])

    def slot(self, b, i):
        p = b.gep(self.slots, [_c(0), i], inbounds=True,
                  source_etype=ir.ArrayType(_SLOT, SLOTS))
        p.type = PTR
        return p

    def futex(self, b, addr, op, val):
        val = val if isinstance(val, ir.Value) else _c(val)
        b.call(self.syscall, [_c(_SYS_FUTEX), addr, _c(op), val, ir.Constant(PTR, None)])

    def wait_for(self, b, state, want, spun, slack):
        """Until *state == want (acquire): spin while a CPU is free (active < cpus + slack)
        and for at most `llgrad_pool_spins` rounds, else sleep; spun: an i64 slot (an alloca
        of the entry block: one in a loop would grow the stack every iteration)."""
        head = b.append_basic_block("wait.head")
        nap = b.append_basic_block("wait.nap")
        done = b.append_basic_block("wait.done")
        b.store(_c(0), spun)
        b.branch(head)
        b.position_at_end(head)
        s = b.load_atomic(state, "acquire", 4, typ=I32)
        b.cbranch(b.icmp_signed("==", s, _c(want, I32)), done, nap)
        b.position_at_end(nap)
        n = b.load(spun, typ=I64)
        a = b.load_atomic(self.active, "monotonic", 8, typ=I64)
        free = b.icmp_signed("<", a, b.add(b.load_atomic(self.cpus, "monotonic", 8, typ=I64),
                                           _c(slack)))
        most = b.load_atomic(self.spins, "monotonic", 8, typ=I64)
        with b.if_else(b.and_(b.icmp_signed("<", n, most), free)) as (spin, sleep):
            with spin:
                b.call(self.pause, [])
                b.store(b.add(n, _c(1)), spun)
            with sleep:                 # (returns at once if *state is no longer s)
                self.futex(b, state, _WAIT, b.zext(s, I64))
        b.branch(head)
        b.position_at_end(done)

    def run_chunks(self):
        """void run_chunks(ptr job): chunks from job.next until none is left."""
        fn = ir.Function(self.mod, ir.FunctionType(ir.VoidType(), [PTR]), "llgrad_pool_chunks")
        fn.linkage = "internal"
        job = fn.args[0]
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        loop, body, out = (fn.append_basic_block(n) for n in ("loop", "body", "out"))
        t = b.load(self.gep(b, job, _JOB, _J_T), typ=I64)
        stride = b.load(self.gep(b, job, _JOB, _J_STRIDE), typ=I64)
        recs = b.load(self.gep(b, job, _JOB, _J_RECS), typ=PTR)
        chunk = b.load(self.gep(b, job, _JOB, _J_FN), typ=PTR)
        b.branch(loop)
        b.position_at_end(loop)
        i = b.atomic_rmw("add", self.gep(b, job, _JOB, _J_NEXT), _c(1), "monotonic")
        b.cbranch(b.icmp_signed("<", i, t), body, out)
        b.position_at_end(body)
        rec = b.gep(recs, [b.mul(i, stride)], inbounds=True, source_etype=ir.IntType(8))
        b.call(_Callee(chunk, _CHUNK), [rec])
        b.branch(loop)
        b.position_at_end(out)
        b.ret_void()
        return fn

    def worker(self, chunks):
        """ptr worker(ptr slot): take each job posted to the slot and run its chunks."""
        fn = ir.Function(self.mod, ir.FunctionType(PTR, [PTR]), _NAMES[1])
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        slot = fn.args[0]
        state = self.gep(b, slot, _SLOT, 0)
        spun = b.alloca(I64)
        csr = b.alloca(I32)
        loop = b.append_basic_block("loop")
        take = b.append_basic_block("take")
        b.branch(loop)
        b.position_at_end(loop)
        self.wait_for(b, state, READY, spun, 0)
        r = b.cmpxchg(state, _c(READY, I32), _c(RUNNING, I32), "acquire", "monotonic")
        b.cbranch(b.extract_value(r, 1), take, loop)    # (else the caller took it back)
        b.position_at_end(take)
        job = b.load(self.gep(b, slot, _SLOT, 2), typ=PTR)
        self.adopt_csr(b, b.trunc(b.load(self.gep(b, job, _JOB, _J_CSR), typ=I64), I32), csr)
        b.call(chunks, [job])
        self.release(b)
        _store_release(b, _c(DONE, I32), state)
        self.futex(b, state, _WAKE, 1)
        b.branch(loop)
        return fn

    def claim(self, worker):
        """i64 claim(ptr job): post job to an IDLE slot (waking its worker), else to an
        EMPTY one (starting its worker); the slot's index, or -1."""
        fn = ir.Function(self.mod, ir.FunctionType(I64, [PTR]), "llgrad_pool_claim")
        fn.linkage = "internal"
        job = fn.args[0]
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        tid = b.alloca(I64)
        for want, fresh in ((IDLE, False), (EMPTY, True)):
            with for_range(b, 0, SLOTS, name="claim") as i:
                slot = self.slot(b, i)
                state = self.gep(b, slot, _SLOT, 0)
                seen = b.load_atomic(state, "monotonic", 4, typ=I32)
                with b.if_then(b.icmp_signed("==", seen, _c(want, I32))):
                    old = b.cmpxchg(state, _c(want, I32), _c(CLAIMED, I32), "acquire",
                                    "monotonic")
                    with b.if_then(b.extract_value(old, 1)):
                        b.store(job, self.gep(b, slot, _SLOT, 2))
                        _store_release(b, _c(READY, I32), state)
                        if fresh:       # its worker: a thread of its own, for good
                            rc = b.call(self.create, [tid, ir.Constant(PTR, None), worker,
                                                      slot])
                            with b.if_then(b.icmp_signed("!=", rc, _c(0, I32))):
                                _store_release(b, _c(EMPTY, I32), state)
                                b.ret(_c(-1))
                        else:
                            self.futex(b, state, _WAKE, 1)
                        b.ret(i)
        b.ret(_c(-1))
        return fn

    def run(self, claim, chunks):
        """void run(ptr fn, ptr recs, i64 t, i64 stride): every chunk, over the pool."""
        fn = ir.Function(self.mod, _run_type(), _NAMES[0])
        chunk, recs, t, stride = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        job = b.alloca(_JOB)
        job.align = 64
        posted = b.alloca(I64, size=SLOTS)
        count = b.alloca(I64)
        spun = b.alloca(I64)
        csr = b.alloca(I32)
        b.call(self.csr_fns[0], [csr])
        for k, v in ((_J_FN, chunk), (_J_RECS, recs), (_J_STRIDE, stride), (_J_T, t),
                     (_J_NEXT, _c(1)), (_J_CSR, b.zext(b.load(csr, typ=I32), I64))):
            b.store(v, self.gep(b, job, _JOB, k))
        b.store(_c(0), count)
        # post the job to a worker per extra chunk while a CPU and a slot are free
        head, body, claimed, work = (fn.append_basic_block(n) for n in
                                     ("post", "post.body", "post.claimed", "work"))
        # (workers for the thread count's threads, not for every chunk: the chunks beyond
        # are over-decomposition, parallel.OVERSPLIT, taken from `next` one at a time)
        nthreads = _thread_count(self.mod, b, t)
        limit = b.select(b.icmp_signed("<", nthreads, _c(SLOTS + 1)), nthreads,
                         _c(SLOTS + 1))
        b.branch(head)
        b.position_at_end(head)
        k = b.phi(I64, "k")
        k.add_incoming(_c(1), b.block.function.entry_basic_block)
        b.cbranch(b.icmp_signed("<", k, limit), body, work)
        b.position_at_end(body)
        got = b.call(self.reserve_fn, [])
        nxt = b.add(k, _c(1))
        with b.if_then(b.not_(got)):
            b.branch(work)              # (no CPU free: the caller runs the rest)
        s = b.call(claim, [job])
        with b.if_then(b.icmp_signed("<", s, _c(0))):
            self.release(b)             # (no worker: try the next chunk)
            k.add_incoming(nxt, b.block)
            b.branch(head)
        b.branch(claimed)
        b.position_at_end(claimed)
        n = b.load(count, typ=I64)
        b.store(s, b.gep(posted, [n], inbounds=True, source_etype=I64))
        b.store(b.add(n, _c(1)), count)
        k.add_incoming(nxt, b.block)
        b.branch(head)
        b.position_at_end(work)
        b.call(_Callee(chunk, _CHUNK), [recs])          # chunk 0
        b.call(chunks, [job])                           # then whatever is left
        n = b.load(count, typ=I64)
        with for_range(b, 0, n, name="collect") as j:
            slot = self.slot(b, b.load(b.gep(posted, [j], inbounds=True, source_etype=I64),
                                       typ=I64))
            state = self.gep(b, slot, _SLOT, 0)
            back = b.cmpxchg(state, _c(READY, I32), _c(IDLE, I32), "monotonic", "monotonic")
            with b.if_else(b.extract_value(back, 1)) as (taken, running):
                with taken:             # no worker started it: its CPU was never used
                    self.release(b)
                with running:
                    self.wait_for(b, state, DONE, spun, 1)
                    _store_release(b, _c(IDLE, I32), state)
        b.ret_void()
        return fn

    def pauses(self):
        """void llgrad_pool_pause(i64 n): n pause instructions (to measure one's length)."""
        fn = ir.Function(self.mod, ir.FunctionType(ir.VoidType(), [I64]), _NAMES[3])
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        with for_range(b, 0, fn.args[0], name="pause"):
            b.call(self.pause, [])
        b.ret_void()
        return fn

    def slots_address(self):
        """ptr llgrad_pool_slots_address(): where the slots live (reset after fork)."""
        fn = ir.Function(self.mod, ir.FunctionType(PTR, []), _NAMES[2])
        ir.IRBuilder(fn.append_basic_block("entry")).ret(self.slots)
        return fn


def _pool_supported():
    return platform.machine() in ("x86_64", "AMD64") and platform.system() == "Linux" \
        and os.environ.get("LLGRAD_POOL", "1") != "0"


def ensure_pool():
    """Make `llgrad_parallel_run` resolvable (call before a threaded kernel is compiled or
    loaded): the pool's where it is supported and LLGRAD_POOL is not 0, else the plain
    threads'. Each is built once per process (or loaded from the disk cache) and kept for
    good, its code with it: the pool's workers run that code for as long as the process
    lives (a new JIT, after jit._reset, is only given the symbol again). Like the trampoline,
    they are llgrad's plumbing: outside jit.stats. It also starts the sampler of the CPUs
    other processes leave free (native/cpus.py), which the pool reads."""
    _cpus.watch()
    j = jit.jit()
    if _state["engine"] is j:
        return
    with _lock:
        if _state["engine"] is j:
            return
        address = None
        if _pool_supported():
            lib = _state["lib"]
            if lib is None:
                try:
                    lib = _build()
                    _state["slots"] = ctypes.CFUNCTYPE(ctypes.c_void_p)(
                        lib.address(_NAMES[2]))()
                    pool_spin.calibrate(ctypes.CFUNCTYPE(None, ctypes.c_int64)(
                        lib.address(_NAMES[3])))
                    _state["lib"] = lib
                except Exception:       # (an unusual platform: plain threads instead)
                    lib = None
            if lib is not None:
                address = lib.address(_NAMES[0])
        if address is None:
            plain = _state["plain"]
            if plain is None:
                key = keys.key_for("llgrad plain threads", "dynamic chunks, min(t,threads)")
                plain = _state["plain"] = jit.load_private(key, [_PLAIN_NAME]) or \
                    jit.compile_private(plain_module(), [_PLAIN_NAME], key=key, opt=True)
            address = plain.address(_PLAIN_NAME)
        jit.add_symbol(_RUN, address)
        _state["engine"] = j


def _reset_after_fork():
    """In a forked child no worker exists: every slot back to EMPTY; the lock free."""
    _lock._at_fork_reinit()
    if _state["slots"]:
        ctypes.memset(_state["slots"], 0, SLOTS * 64)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


def _build():
    if _REAL_CREATE not in jit.jit().symbols:       # (a test may have put its own there)
        jit.add_symbol(_REAL_CREATE, _libc_function("pthread_create"))
    mod = jit.new_module("llgrad_pool")
    gen = _PoolGen(mod)
    chunks = gen.run_chunks()
    worker = gen.worker(chunks)
    gen.run(gen.claim(worker), chunks)
    gen.slots_address()
    gen.pauses()
    key = keys.key_for("llgrad pool", f"slots={SLOTS};spins=word;posts=min(t,threads);"
                                      "job mxcsr;codegen only")
    # (O3's code generation without its IR passes: the pool's code is written as the passes
    # would leave it, its waits are spins on atomics and `pause`; the passes took ~60% of
    # its LLVM time, ~30 ms of a cold process's first build)
    return jit.load_private(key, list(_NAMES)) or \
        jit.compile_private(mod, list(_NAMES), key=key, opt="codegen")
