"""The compile worker (codegen/native/worker.py): LLVM's code generation in a process of its
own gives the same object bytes as in-process; a worker that cannot start, dies, idles out or
refuses a module never costs a result (in-process LLVM takes over, with LLVM's own error
for a bad module); a forked child gets a worker of its own."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from llvmlite import ir

import llgrad
from llgrad.codegen.native import jit, worker


def _module(name, k):
    """A small module: void f(ptr out, ptr x, i64 n): out[i] = x[i] * k + 1, a vector loop."""
    mod = jit.new_module(name)
    f32, i64, ptr = ir.FloatType(), ir.IntType(64), ir.PointerType()
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [ptr, ptr, i64]), name)
    out, x, n = fn.args
    entry, body, done = (fn.append_basic_block(s) for s in ("entry", "body", "done"))
    b = ir.IRBuilder(entry)
    b.cbranch(b.icmp_signed(">", n, ir.Constant(i64, 0)), body, done)
    b.position_at_end(body)
    i = b.phi(i64)
    i.add_incoming(ir.Constant(i64, 0), entry)
    v = b.load(b.gep(x, [i], source_etype=f32), typ=f32)
    v = b.fadd(b.fmul(v, ir.Constant(f32, k)), ir.Constant(f32, 1.0))
    b.store(v, b.gep(out, [i], source_etype=f32))
    nxt = b.add(i, ir.Constant(i64, 1))
    i.add_incoming(nxt, b.block)
    b.cbranch(b.icmp_signed("<", nxt, n), body, done)
    b.position_at_end(done)
    b.ret_void()
    return mod


def _run(compiled, name, k):
    import ctypes
    f = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)(
        int(compiled.address(name)))
    x = np.linspace(-3, 3, 1001, dtype=np.float32)
    out = np.empty_like(x)
    f(out.ctypes.data, x.ctypes.data, x.size)
    np.testing.assert_array_equal(out, x * np.float32(k) + np.float32(1))


@pytest.fixture
def fresh_worker(monkeypatch):
    monkeypatch.setattr(worker, "ENABLED", True)
    worker._reset()
    yield worker
    worker._reset()


@pytest.mark.parametrize("mode", ["O3", "O3-noopt", "O0"])
def test_worker_and_in_process_make_the_same_object(fresh_worker, monkeypatch, mode):
    mod = _module("same_obj", 3.0)
    by_worker = jit._generate(mod, mode, True)
    assert worker.stats["generated"] == 1
    monkeypatch.setattr(worker, "ENABLED", False)
    in_process = jit._generate(mod, mode, True)
    assert by_worker[1] == in_process[1]            # the object file, byte for byte
    assert by_worker[2] == in_process[2]            # the optimised IR


def test_a_worker_that_cannot_start_leaves_code_generation_in_process(fresh_worker,
                                                                       monkeypatch):
    def refuse():
        raise OSError("no processes here")
    monkeypatch.setattr(worker, "_start", refuse)
    compiled = jit.compile_module(_module("no_worker", 2.0), ["no_worker"])
    _run(compiled, "no_worker", 2.0)
    assert worker.stats["generated"] == 0 and worker._broken


def test_a_dead_worker_is_replaced(fresh_worker):
    _run(jit.compile_module(_module("first", 2.0), ["first"]), "first", 2.0)
    worker._proc.kill()
    worker._proc.wait()
    _run(jit.compile_module(_module("second", 5.0), ["second"]), "second", 5.0)
    assert worker.stats["started"] == 2 and worker.stats["generated"] == 2


def test_a_bad_module_raises_llvms_own_error(fresh_worker):
    mod = jit.new_module("bad")
    fn = ir.Function(mod, ir.FunctionType(ir.IntType(32), []), "bad")
    b = ir.IRBuilder(fn.append_basic_block())
    b.ret(ir.Constant(ir.IntType(64), 0))          # (returns an i64 from an i32 function)
    with pytest.raises(RuntimeError):
        jit.compile_module(mod, ["bad"])
    assert worker.stats["failed"] == 1
    _run(jit.compile_module(_module("after_bad", 2.0), ["after_bad"]), "after_bad", 2.0)


_IDLE_CHILD = textwrap.dedent("""
    import time
    from llgrad.codegen.native import jit, worker
    import test_compile_worker as t
    t._run(jit.compile_module(t._module("idle_a", 2.0), ["idle_a"]), "idle_a", 2.0)
    time.sleep(1.5)
    assert worker._proc.poll() is not None      # idled out
    t._run(jit.compile_module(t._module("idle_b", 3.0), ["idle_b"]), "idle_b", 3.0)
    print(worker.stats["started"], worker.stats["generated"], flush=True)
    import os
    pid = os.fork()
    if pid == 0:                                # a child builds with a worker of its own
        t._run(jit.compile_module(t._module("in_child", 4.0), ["in_child"]), "in_child", 4.0)
        os._exit(0 if worker.stats["generated"] >= 1 else 3)
    _, status = os.waitpid(pid, 0)
    print(os.waitstatus_to_exitcode(status), flush=True)
""")


@pytest.mark.slow
def test_an_idle_worker_exits_and_a_forked_child_gets_its_own(tmp_path):
    env = dict(os.environ, LLGRAD_COMPILE_WORKER="1", LLGRAD_COMPILE_WORKER_IDLE="0.5",
               LLGRAD_CACHE_DIR=str(tmp_path),
               PYTHONPATH=os.pathsep.join([os.path.dirname(__file__),
                                           os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", _IDLE_CHILD], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    started_generated, child = out.stdout.split()[-3:-1], out.stdout.split()[-1]
    assert started_generated == ["2", "2"] and child == "0"


def test_compiled_training_matches_with_and_without_the_worker(fresh_worker, monkeypatch,
                                                               tmp_path):
    from llgrad.codegen.native import cache_dir
    results = []
    for enabled in (True, False):           # (a cache of its own each: both generate code)
        monkeypatch.setenv("LLGRAD_CACHE_DIR", str(tmp_path / str(enabled)))
        cache_dir._reset()
        monkeypatch.setattr(worker, "ENABLED", enabled)
        jit._reset()
        llgrad.manual_seed(0)
        model = llgrad.nn.Sequential(llgrad.nn.Linear(5, 9), llgrad.nn.GELU(),
                                     llgrad.nn.Linear(9, 2))
        x = llgrad.randn(7, 5)
        f = llgrad.compile(lambda: (model(x) ** 2).mean())
        for _ in range(3):
            model.zero_grad()
            f().backward()
            f.wait()
        results.append([p.grad.numpy().copy() for p in model.parameters()])
    cache_dir._reset()
    assert worker.stats["generated"] >= 1
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)


_EXIT_DURING_A_BUILD = r"""
import llgrad
x = llgrad.randn(64, 64, requires_grad=True)
f = llgrad.compile(lambda x: (x.sin() * 2).sum())
for _ in range(3):
    f(x).backward()
"""


def test_exiting_during_a_background_build_leaves_no_worker_running(tmp_path):
    """A process that exits while its builder thread (a daemon) still generates code: the
    build that asks after the exit handler ran gets LLVM in-process, not a new worker that
    nothing would stop (it showed as `ResourceWarning: subprocess N is still running`)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLGRAD_")}
    env.update(LLGRAD_CACHE_DIR=str(tmp_path))      # (a cold cache: the builds take long)
    r = subprocess.run([sys.executable, "-W", "always", "-c", _EXIT_DURING_A_BUILD],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "ResourceWarning" not in r.stderr, r.stderr[-2000:]
