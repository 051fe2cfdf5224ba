"""A process that forks while another thread compiles: the child compiles and runs kernels
of its own (the build lock, the JIT's lock and the pool are made afresh in it, and the
fork waits for LLVM to be between calls), and the parent carries on. Each case runs in a
subprocess with a timeout; a child that hangs is killed and the test fails."""
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(not hasattr(os, "fork") or not hasattr(os, "register_at_fork"),
                                reason="needs os.fork")

_SCRIPT = """
import os, sys, threading, time
import numpy as np
import llgrad
from llgrad.codegen import build, lower as lower_mod
from llgrad.codegen.lower import lower
from llgrad.codegen.native import jit
from llgrad.ir import Builder, TensorType

WHERE = sys.argv[1]            # where the compiling thread is held when the parent forks
jit.FORK_WAIT_SECONDS = float(sys.argv[2])
llgrad.set_num_threads(2)

def graph(scale, n=300_001):   # (big enough to run on the thread pool)
    bld = Builder(f"g{scale}".replace(".", "_").replace("-", "m"))
    x = bld.input(TensorType("float64", (n,)))
    y = bld.add("tanh", [bld.add("mul", [x, scale])])
    return bld.ret(bld.add("sum", [y], {"dim": None, "keepdim": False}))

def check(scale):
    x = np.linspace(-1, 1, 300_001)
    got = lower(graph(scale))([x])[0]
    assert abs(got - np.tanh(scale * x).sum()) < 1e-6, (got, scale)

check(1.0)                                  # the pool and the trampoline exist, workers ran

inside, release = threading.Event(), threading.Event()
if WHERE == "llvm":            # in LLVM (in-process): under the JIT's lock and the build lock
    real = jit.worker_main.generate
    def held(*a, **k):
        inside.set(); release.wait(30); return real(*a, **k)
    jit.worker_main.generate = held
elif WHERE == "worker":        # waiting for the compile worker's reply: under its lock
    real = jit.worker_main._read
    def held(*a, **k):
        inside.set(); release.wait(30); return real(*a, **k)
    jit.worker_main._read = held
else:                          # building the module: the build lock only
    real = lower_mod.emit_plan
    def held(*a, **k):
        inside.set(); release.wait(30); return real(*a, **k)
    lower_mod.emit_plan = held

t = threading.Thread(target=check, args=(2.5,))
t.start()
assert inside.wait(30)
threading.Timer(0.5, release.set).start()   # (the fork may wait for the JIT's lock)
pid = os.fork()
if pid == 0:
    try:
        if WHERE == "llvm":
            jit.worker_main.generate = real
        elif WHERE == "worker":
            jit.worker_main._read = real
        else:
            lower_mod.emit_plan = real
        check(3.5)                          # a compile of the child's own
        check(1.0)                          # and a kernel the parent compiled
        f = llgrad.compile(lambda a: (a * 2).tanh().sum())
        a = llgrad.tensor(np.linspace(-1, 1, 300_001))
        assert abs(float(f(a)) - np.tanh(2 * np.linspace(-1, 1, 300_001)).sum()) < 1e-6
        assert abs(float(f(a)) - np.tanh(2 * np.linspace(-1, 1, 300_001)).sum()) < 1e-6
        os._exit(0)
    except BaseException as e:
        print("child:", repr(e), file=sys.stderr, flush=True)
        os._exit(3)
deadline = time.monotonic() + 60
while True:
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        break
    if time.monotonic() > deadline:
        os.kill(pid, 9)
        print("the child hung", file=sys.stderr)
        sys.exit(4)
    time.sleep(0.05)
release.set()
t.join(60)
assert not t.is_alive()
check(4.5)                                  # the parent carries on
print(os.waitstatus_to_exitcode(status))
"""


@pytest.mark.parametrize("where,wait", [("llvm", 60.0), ("build", 60.0), ("llvm", 0.0),
                                        ("worker", 60.0)],
                         ids=["in-llvm", "building-the-module", "in-llvm-no-wait",
                              "waiting-for-the-worker"])
@pytest.mark.slow
def test_fork_while_another_thread_compiles(tmp_path, where, wait):
    """in-llvm: LLVM in this process (no compile worker). in-llvm-no-wait: the fork does not
    wait for the JIT's lock (as if the compile took longer than FORK_WAIT_SECONDS): the child
    starts a JIT of its own. waiting-for-the-worker: the child starts a worker of its own."""
    env = dict(os.environ, LLGRAD_CACHE_DIR=str(tmp_path / "cache"),
               LLGRAD_COMPILE_WORKER="0" if where == "llvm" else "1")
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(_SCRIPT), where, str(wait)],
                       env=env, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[-1] == "0", r.stderr
