"""A pool of persistent worker threads behind the fork-join of parallel.py.

Kernels start the other chunks of a parallel loop with `llgrad_pthread_create(&handle,
NULL, worker, rec)` and wait with `llgrad_pthread_join(handle, NULL)`. Creating and joining
a thread per loop costs ~30-50 us in a VM (clone, a stack, waking an idle vCPU): as much
as a loop over 300K floats takes. So once the pool is built (`ensure_pool`, before the
first kernel is compiled or loaded) those two symbols name the functions below instead,
with the same signatures, and a chunk goes to a worker that is already running:

    slot (64 bytes, one cache line each): state, fn, arg
    state: EMPTY (no worker) -> CLAIMED (a caller writes fn, arg) -> READY -> DONE (the
           worker ran fn(arg)) -> IDLE (the caller joined) -> CLAIMED -> ...

- create claims an IDLE slot (compare-and-swap), else an EMPTY one whose worker it then
  starts (a real pthread); with every slot busy it starts a plain thread, as before. The
  handle of a pool chunk is its slot index with bit 62 set (a pthread_t never has it).
- A worker spins a while (~0.1-0.2 ms, `pause`) on its state after each chunk, then sleeps on
  it (futex): the next loop of the same call, or of the next call after a little Python,
  finds it awake. join spins, then sleeps, until DONE, and marks the slot IDLE.
- Memory order: fn and arg are written before the release store of READY that the worker
  reads with acquire; the chunk's results before DONE (release), read by join (acquire).
- After os.fork the child has no workers: every slot is reset to EMPTY (register_at_fork).

Linux on x86-64 only (the futex system call's number); elsewhere, or if building fails,
kernels keep plain pthreads. LLGRAD_POOL=0 keeps them too."""
import ctypes
import os
import platform
import threading

from llvmlite import ir

from ..native import jit
from .loops import for_range
from .parallel import _CREATE, _JOIN, _libc_function
from .scalar import I32, I64, PTR

SLOTS = 64
SPINS = 4096                    # pause instructions before sleeping (~0.1-0.2 ms)
EMPTY, CLAIMED, READY, DONE, IDLE = 0, 1, 2, 3, 4
TAG = 1 << 62
_SYS_FUTEX, _WAIT, _WAKE = 202, 128, 129        # x86-64; FUTEX_*_PRIVATE
_SLOT = ir.LiteralStructType([I32, I32, PTR, PTR, ir.ArrayType(I64, 5)])     # 64 bytes
_NAMES = ("llgrad_pool_create", "llgrad_pool_join", "llgrad_pool_worker")
_REAL_CREATE, _REAL_JOIN = "llgrad_real_pthread_create", "llgrad_real_pthread_join"

_lock = threading.Lock()
_state = {"lib": None, "slots": 0, "engine": None}   # (never reset: see ensure_pool)


def _c(v, t=I64):
    return ir.Constant(t, v)


def _store_release(b, value, ptr):
    """An atomic release store (IRBuilder.store_atomic wants a typed pointer)."""
    b._insert(ir.instructions.StoreAtomicInstr(b.block, value, ptr, "release", 4))


class _Callee:
    """A loaded function pointer as llvmlite's call wants a callee (its function type)."""

    def __init__(self, value, fnty):
        self.value, self.function_type, self.type = value, fnty, value.type

    def get_reference(self):
        return self.value.get_reference()


class _Gen:
    def __init__(self, mod):
        self.mod = mod
        self.slots = ir.GlobalVariable(mod, ir.ArrayType(_SLOT, SLOTS), name="llgrad_pool_slots")
        self.slots.initializer = ir.Constant(ir.ArrayType(_SLOT, SLOTS), None)
        self.slots.align = 64
        self.slots.linkage = "internal"
        self.slots.type = PTR           # (opaque, as LLVM has it: see parallel._opaque)
        self.syscall = ir.Function(mod, ir.FunctionType(I64, [I64], var_arg=True), "syscall")
        self.pause = ir.Function(mod, ir.FunctionType(ir.VoidType(), []),
                                 "llvm.x86.sse2.pause")
        thread_fn = [PTR, PTR, PTR, PTR]
        self.create = ir.Function(mod, ir.FunctionType(I32, thread_fn), _REAL_CREATE)
        self.join = ir.Function(mod, ir.FunctionType(I32, [I64, PTR]), _REAL_JOIN)

    def field(self, b, slot, k):
        p = b.gep(slot, [_c(0, I32), _c(k, I32)], inbounds=True, source_etype=_SLOT)
        p.type = PTR
        return p

    def slot(self, b, i):
        p = b.gep(self.slots, [_c(0), i], inbounds=True, source_etype=ir.ArrayType(_SLOT, SLOTS))
        p.type = PTR
        return p

    def futex(self, b, addr, op, val):
        val = val if isinstance(val, ir.Value) else _c(val)
        b.call(self.syscall, [_c(_SYS_FUTEX), addr, _c(op), val, ir.Constant(PTR, None)])

    def wait_for(self, b, state, want, spun):
        """Spin, then sleep, until *state == want (acquire); spun: an i64 slot (an alloca
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
        with b.if_else(b.icmp_signed("<", n, _c(SPINS))) as (spin, sleep):
            with spin:
                b.call(self.pause, [])
                b.store(b.add(n, _c(1)), spun)
            with sleep:                 # (returns at once if *state is no longer s)
                self.futex(b, state, _WAIT, b.zext(s, I64))
        b.branch(head)
        b.position_at_end(done)

    def worker(self):
        """ptr worker(ptr slot): run each posted chunk, for ever."""
        fn = ir.Function(self.mod, ir.FunctionType(PTR, [PTR]), _NAMES[2])
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        slot = fn.args[0]
        state = self.field(b, slot, 0)
        spun = b.alloca(I64)
        loop = b.append_basic_block("loop")
        b.branch(loop)
        b.position_at_end(loop)
        self.wait_for(b, state, READY, spun)
        chunk = b.load(self.field(b, slot, 2), typ=PTR)
        arg = b.load(self.field(b, slot, 3), typ=PTR)
        b.call(_Callee(chunk, ir.FunctionType(PTR, [PTR])), [arg])
        _store_release(b, _c(DONE, I32), state)
        self.futex(b, state, _WAKE, 1)
        b.branch(loop)
        return fn

    def pool_create(self, worker):
        """i32 create(ptr handle, ptr attr, ptr fn, ptr arg): as pthread_create."""
        fn = ir.Function(self.mod, ir.FunctionType(I32, [PTR, PTR, PTR, PTR]), _NAMES[0])
        handle, attr, chunk, arg = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        tid = b.alloca(I64)
        for want, fresh in ((IDLE, False), (EMPTY, True)):
            with for_range(b, 0, SLOTS, name="claim") as i:
                slot = self.slot(b, i)
                state = self.field(b, slot, 0)
                old = b.cmpxchg(state, _c(want, I32), _c(CLAIMED, I32), "acquire", "monotonic")
                with b.if_then(b.extract_value(old, 1)):
                    b.store(chunk, self.field(b, slot, 2))
                    b.store(arg, self.field(b, slot, 3))
                    _store_release(b, _c(READY, I32), state)
                    if fresh:           # its worker: a thread of its own, for good
                        rc = b.call(self.create, [tid, ir.Constant(PTR, None), worker, slot])
                        with b.if_then(b.icmp_signed("!=", rc, _c(0, I32))):
                            _store_release(b, _c(EMPTY, I32), state)
                            b.ret(rc)   # (the kernel runs this chunk itself)
                    else:
                        self.futex(b, state, _WAKE, 1)
                    b.store(b.or_(i, _c(TAG)), handle)
                    b.ret(_c(0, I32))
        b.ret(b.call(self.create, [handle, attr, chunk, arg]))     # every slot busy
        return fn

    def slots_address(self):
        """ptr llgrad_pool_slots_address(): where the slots live (reset after fork)."""
        fn = ir.Function(self.mod, ir.FunctionType(PTR, []), "llgrad_pool_slots_address")
        ir.IRBuilder(fn.append_basic_block("entry")).ret(self.slots)
        return fn

    def pool_join(self):
        """i32 join(i64 handle, ptr result): as pthread_join."""
        fn = ir.Function(self.mod, ir.FunctionType(I32, [I64, PTR]), _NAMES[1])
        handle, res = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        spun = b.alloca(I64)
        ours = b.icmp_signed("!=", b.and_(handle, _c(TAG)), _c(0))
        with b.if_then(b.not_(ours)):
            b.ret(b.call(self.join, [handle, res]))
        slot = self.slot(b, b.and_(handle, _c(TAG - 1)))
        state = self.field(b, slot, 0)
        self.wait_for(b, state, DONE, spun)
        _store_release(b, _c(IDLE, I32), state)
        b.ret(_c(0, I32))
        return fn


def ensure_pool():
    """Point the kernels' thread calls at the pool (call before a kernel is compiled or
    loaded: code already loaded keeps plain pthreads, which is as correct). The pool is
    built once per process and kept for good, with the engine holding its code: its
    workers run that code for as long as the process lives (a new engine, after
    jit._reset, is only given the symbols again). Does nothing where the pool is not
    supported or LLGRAD_POOL=0."""
    j = jit.jit()
    if _state["engine"] is j:
        return
    if platform.machine() not in ("x86_64", "AMD64") or not platform.system() == "Linux" \
            or os.environ.get("LLGRAD_POOL", "1") == "0":
        return
    with _lock:
        if _state["engine"] is j:
            return
        lib = _state["lib"]
        if lib is None:
            try:
                lib = _build()
            except Exception:           # (an unusual platform: plain threads stay)
                return
            _state["slots"] = ctypes.CFUNCTYPE(ctypes.c_void_p)(
                lib.address("llgrad_pool_slots_address"))()
            _state["lib"] = lib
        jit.add_symbol(_CREATE, lib.address(_NAMES[0]))
        jit.add_symbol(_JOIN, lib.address(_NAMES[1]))
        _state["engine"] = j


def _reset_after_fork():
    """In a forked child no worker exists: every slot back to EMPTY."""
    if _state["slots"]:
        ctypes.memset(_state["slots"], 0, SLOTS * 64)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


def _build():
    for name, real in ((_REAL_CREATE, "pthread_create"), (_REAL_JOIN, "pthread_join")):
        if name not in jit.jit().symbols:       # (a test may have put its own there)
            jit.add_symbol(name, _libc_function(real))
    mod = jit.new_module("llgrad_pool")
    gen = _Gen(mod)
    worker = gen.worker()
    gen.pool_create(worker)
    gen.pool_join()
    gen.slots_address()
    key = jit.key_for("llgrad pool", f"slots={SLOTS};spins={SPINS}")
    return jit.lookup(key, _NAMES[0]) or jit.compile_module(mod, [_NAMES[0]], key=key)
