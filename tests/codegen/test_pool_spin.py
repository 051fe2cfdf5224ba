"""How long the pool's waiting threads spin (codegen/lowerings/pool_spin.py): measured in
time, not a count of pauses whose length differs 5x between hosts; settable at run time and
from LLGRAD_SPIN_US; results the same whether a worker spins or sleeps."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from llgrad.codegen.lower import lower
from llgrad.codegen.lowerings import pool, pool_spin
from llgrad.codegen.native import cpus
from llgrad.ir import Builder, TensorType
from llgrad.ir.interpret import evaluate

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")


def _kernel(n=400_001):
    bld = Builder("spun")
    x = bld.input(TensorType("float64", (n,)))
    g = bld.ret(bld.add("mul", [bld.add("exp", [x], {}), 2.0], {}))
    return lower(g), g


@pytest.fixture
def spin_put_back(two_threads):
    yield
    pool_spin.set_spin_us(pool_spin.SPIN_US)


def test_spin_is_a_time(spin_put_back):
    kernel, _ = _kernel()
    kernel([np.zeros(400_001)])
    pool.ensure_pool()
    if pool._state["lib"] is None:
        pytest.skip("no pool on this platform")
    assert abs(pool_spin.spin_us() - pool_spin.SPIN_US) < 0.01 * pool_spin.SPIN_US
    pool_spin.set_spin_us(250)
    assert cpus.spins.value == int(250e-6 / pool_spin._state["per_pause"])
    assert abs(pool_spin.spin_us() - 250) < 1


@pytest.mark.parametrize("us", [0, 5, 3000])
def test_results_whether_workers_spin_or_sleep(spin_put_back, us):
    kernel, g = _kernel()
    a = np.random.default_rng(0).standard_normal(400_001) / 4
    want = kernel([a])[0]
    pool_spin.set_spin_us(us)
    for _ in range(20):
        np.testing.assert_array_equal(kernel([a])[0], want)
    np.testing.assert_allclose(want, evaluate(g, [a])[0][0], rtol=1e-14)


@pytest.mark.parametrize("bad", [-1, "5", None, True, float("nan"), float("inf"), 1e30])
def test_bad_lengths(bad):
    with pytest.raises(ValueError, match="set_spin_us"):
        pool_spin.set_spin_us(bad)


def test_environment_sets_the_length():
    code = textwrap.dedent("""
        import numpy as np, llgrad
        from llgrad.codegen.lower import lower
        from llgrad.codegen.lowerings import pool, pool_spin
        from llgrad.ir import Builder, TensorType
        llgrad.set_num_threads(2)
        bld = Builder("spun")
        x = bld.input(TensorType("float64", (300_001,)))
        lower(bld.ret(bld.add("exp", [x], {})))([np.zeros(300_001)])
        pool.ensure_pool()
        print(None if pool._state["lib"] is None else round(pool_spin.spin_us()))
    """)
    env = dict(os.environ, LLGRAD_SPIN_US="40", LLGRAD_COMPILE="sync")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-1] in ("None", "40")
