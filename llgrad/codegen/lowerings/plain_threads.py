"""Code both thread runtimes share (the CPU budget: a CPU is reserved before a thread is
handed a chunk, so llgrad's running threads never outnumber the CPUs), and the plain one:
`llgrad_plain_run`, a pthread per extra thread, used where the pool (pool.py) is not
(LLGRAD_POOL=0, a platform other than Linux x86-64, or if building the pool failed)."""
from llvmlite import ir

from ..native import cpus, jit
from ..native.threadcount import COUNT, PTHREAD_CREATE, PTHREAD_JOIN
from .loops import for_range
from .scalar import I1, I32, I64, PTR

PLAIN_NAME = "llgrad_plain_run"


def c(v, t=I64):
    return ir.Constant(t, v)


class Callee:
    """A loaded function pointer as llvmlite's call wants a callee (its function type)."""

    def __init__(self, value, fnty):
        self.value, self.function_type, self.type = value, fnty, value.type

    def get_reference(self):
        return self.value.get_reference()


CHUNK = ir.FunctionType(PTR, [PTR])            # a chunk: ptr fn(ptr rec)


def run_type():
    return ir.FunctionType(ir.VoidType(), [PTR, PTR, I64, I64])


class CpuBudget:
    """Code shared by both runtimes: the CPU budget."""

    def __init__(self, mod):
        self.mod = mod
        self.active, self.cpus = cpus.declare(mod)

    def gep(self, b, ptr, ty, *idx):
        p = b.gep(ptr, [c(0, I32), *(c(k, I32) for k in idx)], inbounds=True,
                  source_etype=ty)
        p.type = PTR
        return p

    def reserve(self):
        """i1 reserve(): take a CPU (active += 1) if one is free (active < cpus)."""
        fn = ir.Function(self.mod, ir.FunctionType(I1, []), "llgrad_cpu_reserve")
        fn.linkage = "internal"
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        head, full, try_ = (fn.append_basic_block(n) for n in ("head", "full", "try"))
        b.branch(head)
        b.position_at_end(head)
        a = b.load_atomic(self.active, "monotonic", 8, typ=I64)
        n = b.load_atomic(self.cpus, "monotonic", 8, typ=I64)
        b.cbranch(b.icmp_signed(">=", a, n), full, try_)
        b.position_at_end(full)
        b.ret(c(0, I1))
        b.position_at_end(try_)
        r = b.cmpxchg(self.active, a, b.add(a, c(1)), "monotonic", "monotonic")
        ok = fn.append_basic_block("ok")
        b.cbranch(b.extract_value(r, 1), ok, head)
        b.position_at_end(ok)
        b.ret(c(1, I1))
        return fn

    def release(self, b):
        b.atomic_rmw("sub", self.active, c(1), "monotonic")


def thread_count(mod, b, t):
    """min(t, llgrad_num_threads), at least 1: how many threads run t chunks (the rest of
    the chunks are over-decomposition, parallel.OVERSPLIT, taken one at a time)."""
    g = mod.globals.get(COUNT)
    if g is None:
        g = ir.GlobalVariable(mod, I64, name=COUNT)     # (external)
        g.type = PTR
    n = b.load_atomic(g, "monotonic", 8, typ=I64)
    n = b.select(b.icmp_signed("<", n, t), n, t)
    return b.select(b.icmp_signed("<", n, c(1)), c(1), n)


_JOB = ir.LiteralStructType([PTR, PTR, I64, I64, I64])      # fn, recs, stride, t, next


def plain_module():
    """llgrad_plain_run: a pthread per extra thread (while a CPU is free), each, as the
    caller, taking chunks one at a time (an atomic counter) until none is left; then join
    each (a chunk no thread took ran on the caller)."""
    mod = jit.new_module("llgrad_plain_run")
    gen = CpuBudget(mod)
    reserve = gen.reserve()
    create = ir.Function(mod, ir.FunctionType(I32, [PTR, PTR, PTR, PTR]), PTHREAD_CREATE)
    join = ir.Function(mod, ir.FunctionType(I32, [I64, PTR]), PTHREAD_JOIN)

    # ptr chunks(ptr job): chunks from job.next until none is left
    chunks = ir.Function(mod, CHUNK, "llgrad_plain_chunks")
    chunks.linkage = "internal"
    b = ir.IRBuilder(chunks.append_basic_block("entry"))
    job = chunks.args[0]
    loop, body, out = (chunks.append_basic_block(n) for n in ("loop", "body", "out"))
    fnp = b.load(gen.gep(b, job, _JOB, 0), typ=PTR)
    recs = b.load(gen.gep(b, job, _JOB, 1), typ=PTR)
    stride = b.load(gen.gep(b, job, _JOB, 2), typ=I64)
    t = b.load(gen.gep(b, job, _JOB, 3), typ=I64)
    b.branch(loop)
    b.position_at_end(loop)
    i = b.atomic_rmw("add", gen.gep(b, job, _JOB, 4), c(1), "monotonic")
    b.cbranch(b.icmp_signed("<", i, t), body, out)
    b.position_at_end(body)
    b.call(Callee(fnp, CHUNK), [b.gep(recs, [b.mul(i, stride)], inbounds=True,
                                       source_etype=ir.IntType(8))])
    b.branch(loop)
    b.position_at_end(out)
    b.ret(ir.Constant(PTR, None))

    fn = ir.Function(mod, run_type(), PLAIN_NAME)
    chunk, recs, t, stride = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    job = b.alloca(_JOB)
    for k, v in enumerate((chunk, recs, stride, t, c(0))):
        b.store(v, gen.gep(b, job, _JOB, k))
    nthreads = thread_count(mod, b, t)
    handles = b.alloca(I64, size=nthreads)  # (a handle of 0 with started 0: not started)
    started = b.alloca(I64, size=nthreads)
    with for_range(b, 1, nthreads, name="spawn") as i:
        h = b.gep(handles, [i], inbounds=True, source_etype=I64)
        ok = b.gep(started, [i], inbounds=True, source_etype=I64)
        b.store(c(0), ok)
        with b.if_then(b.call(reserve, [])):
            rc = b.call(create, [h, ir.Constant(PTR, None), chunks, job])
            with b.if_else(b.icmp_signed("==", rc, c(0, I32))) as (yes, no):
                with yes:
                    b.store(c(1), ok)
                with no:
                    gen.release(b)
    b.call(chunks, [job])
    with for_range(b, 1, nthreads, name="join") as i:
        ok = b.load(b.gep(started, [i], inbounds=True, source_etype=I64), typ=I64)
        with b.if_then(b.icmp_signed("!=", ok, c(0))):
            b.call(join, [b.load(b.gep(handles, [i], inbounds=True, source_etype=I64),
                                 typ=I64), ir.Constant(PTR, None)])
            gen.release(b)
    b.ret_void()
    return mod
