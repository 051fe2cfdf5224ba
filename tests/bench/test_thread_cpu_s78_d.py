"""bench/thread_cpu.py --no-spin reaches the pool: its workers' CPU column is meant to be the
work they took over, which holds only when waiting threads sleep at once. (It set an
attribute the pool's code never reads, so the column counted every worker's ~1 ms spin
after each job: on the GRU model the second thread looked as busy as the first while the
caller's own time did not shrink.)"""
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import thread_cpu  # noqa: E402

from llgrad.codegen.lowerings import pool, pool_spin  # noqa: E402
from llgrad.codegen.native import cpus  # noqa: E402


@pytest.fixture
def spin_restored():
    before = pool_spin._state["us"]
    yield
    pool_spin.set_spin_us(pool_spin.spin_us_from_env() if before is None else before)


def test_no_spin_sets_the_word_the_pool_reads(spin_restored):
    pool.ensure_pool()
    if pool_spin.spin_us() is None:
        pytest.skip("no pool on this host (plain threads never spin)")
    pool_spin.set_spin_us(500)
    assert cpus.spins.value > 0
    thread_cpu.without_spin()
    assert cpus.spins.value == 0
    assert pool_spin.spin_us() == 0
