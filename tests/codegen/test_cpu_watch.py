"""The CPUs llgrad's threads may use while other processes keep some busy (native/cpus.py):
the count the pool reads, from the other processes' runnable threads."""
import subprocess
import sys
import textwrap

import pytest

from llgrad.codegen.native import cpus


@pytest.mark.parametrize("n,load,want", [(2, 0.0, 2), (2, 0.4, 2), (2, 0.6, 1), (2, 3.0, 1),
                                         (8, 2.2, 6), (1, 0.0, 1), (4, 9.0, 1)])
def test_effective_cpus(n, load, want):
    assert cpus._effective(n, load) == want


def test_running_others_reads_proc():
    others = cpus._running_others()
    if others is None:
        pytest.skip("no /proc/stat here")
    assert isinstance(others, int) and others >= 0


_CHILD = """
    import os, time, numpy as np, llgrad
    from llgrad.codegen.native import cpus
    from llgrad.codegen.lower import lower
    from llgrad.ir import Builder, TensorType
    llgrad.set_num_threads(2)
    n = 600_001
    bld = Builder("watched")
    x = bld.input(TensorType("float64", (n,)))
    g = bld.ret(bld.add("sum", [bld.add("exp", [x], {})], {"dim": None, "keepdim": False}))
    k = lower(g)                                 # a threaded loop: the sampler starts
    a = np.linspace(-1, 1, n)
    want = np.exp(a).sum()
    time.sleep(3 * cpus.SAMPLE_S)
    assert cpus._watch["thread"] is not None
    assert 1 <= cpus.cpus.value <= cpus.cpu_count()
    for c in (1, cpus.cpu_count()):              # whatever the sampler says, the same sums
        cpus.cpus.value = c
        assert abs(k([a])[0] - want) < 1e-9 * want
    print("ok")
"""


def test_the_sampler_runs_and_results_do_not_depend_on_it():
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(_CHILD)], capture_output=True,
                       text=True, timeout=120,
                       env={**__import__("os").environ, "LLGRAD_CPU_WATCH": "1"})
    assert r.returncode == 0, r.stderr
    assert "ok" in r.stdout
