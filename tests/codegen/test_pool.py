"""The pool of persistent workers behind parallel loops (codegen/lowerings/pool.py): kernels call it
once it is built; results equal plain threads' and the interpreter's; many Python threads
calling threaded kernels at once; more chunks than slots; a forked child; LLGRAD_POOL=0."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import llgrad
from llgrad.codegen.native import jit
from llgrad.codegen.lowerings import pool
from llgrad.codegen.lower import lower
from llgrad.ir import Builder, TensorType
from llgrad.ir.interpret import evaluate

N = 600_001
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")


def _graph(n=N):
    bld = Builder("pooled")
    x = bld.input(TensorType("float64", (n,)))
    e = bld.add("exp", [x], {})
    return bld.ret(bld.add("sum", [e], {"dim": None, "keepdim": False}),
                   bld.add("mul", [e, 2.0], {}))


@pytest.fixture
def threads():
    old = llgrad.get_num_threads()
    yield llgrad.set_num_threads
    llgrad.set_num_threads(old)


def _check(kernel, a, g):
    got = kernel([a])
    want, _ = evaluate(g, [a])         # (NumPy's exp: a few ulps from the native one)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-14)


def test_kernels_call_the_pool(threads):
    g = _graph()
    k = lower(g)
    if pool._state["lib"] is None:
        pytest.skip("no pool on this platform")
    assert jit.jit().symbols["llgrad_parallel_run"] == pool._state["lib"].address(
        "llgrad_pool_run")
    a = np.random.default_rng(0).standard_normal(N)
    for t in (2, 3, 2, 1, 2):           # workers are reused; the count changes freely
        threads(t)
        for _ in range(5):
            _check(k, a, g)


def test_many_python_threads_at_once(threads, run_on_threads):
    """Callers on 4 Python threads, each kernel call forking 3 chunks: every result
    right, nothing hangs (each call claims slots of its own)."""
    threads(4)
    g = _graph()
    k = lower(g)
    a = np.random.default_rng(1).standard_normal(N)
    want = k([a])                       # each call must give exactly this (same chunks)

    def work(_):
        for _ in range(40):
            s, y = k([a])
            assert s == want[0] and np.array_equal(y, want[1])
    run_on_threads(work, 4)


def test_more_chunks_than_slots(threads):
    """Chunks beyond the pool's slots start plain threads, as before."""
    threads(pool.SLOTS + 6)
    bld = Builder("wide")
    x = bld.input(TensorType("float64", (N * 16,)))
    g = bld.ret(bld.add("sum", [bld.add("exp", [x], {})], {"dim": None, "keepdim": False}))
    a = np.linspace(-1, 1, N * 16)
    (s,) = lower(g)([a])
    assert abs(s - np.exp(a).sum()) <= 1e-9 * np.exp(a).sum()


def _python(code, **env):
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)],
                       env=dict(os.environ, **env), capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


_FORK = """
    import os, numpy as np, llgrad
    from llgrad.codegen.lower import lower
    from llgrad.ir import Builder, TensorType
    llgrad.set_num_threads(3)
    n = 600_001
    bld = Builder("forked")
    x = bld.input(TensorType("float64", (n,)))
    g = bld.ret(bld.add("sum", [bld.add("exp", [x], {})], {"dim": None, "keepdim": False}))
    k = lower(g)
    a = np.linspace(-1, 1, n)
    want = np.exp(a).sum()
    assert abs(k([a])[0] - want) < 1e-9 * want          # the parent's workers exist now
    pid = os.fork()
    if pid == 0:                                         # the child has none: it makes its own
        ok = all(abs(k([a])[0] - want) < 1e-9 * want for _ in range(3))
        os._exit(0 if ok else 3)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, status
    assert abs(k([a])[0] - want) < 1e-9 * want
    print("ok")
"""


@pytest.mark.slow
def test_a_forked_child_starts_its_own_workers():
    assert _python(_FORK, LLGRAD_CACHE_DIR="0").split() == ["ok"]


def test_plain_threads_when_switched_off():
    out = _python("""
        import numpy as np, llgrad
        from llgrad.codegen.native import jit
        from llgrad.codegen.lowerings import pool
        from llgrad.codegen.lower import lower
        from llgrad.ir import Builder, TensorType
        llgrad.set_num_threads(2)
        bld = Builder("plain")
        x = bld.input(TensorType("float64", (600_001,)))
        g = bld.ret(bld.add("sum", [bld.add("exp", [x], {})], {"dim": None, "keepdim": False}))
        a = np.linspace(-1, 1, 600_001)
        assert abs(lower(g)([a])[0] - np.exp(a).sum()) < 1e-6
        print(pool._state["lib"] is None)
        """, LLGRAD_POOL="0", LLGRAD_CACHE_DIR="0")
    assert out.split() == ["True"]
