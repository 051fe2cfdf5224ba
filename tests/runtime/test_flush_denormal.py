"""llgrad.set_flush_denormal (runtime/fpu_flags.py): subnormal floats read and written as zero
on the calling thread, as torch.set_flush_denormal does, in NumPy's eager ops, in eager
native kernels and products split over the pool at 2 threads, and in compiled code; pool
workers that ran jobs before the switch take the caller's flags with the next job (turned
on and off again); _reset() turns it off."""
import platform

import numpy as np
import pytest

import llgrad
from llgrad.compile import eager_builds
from llgrad.runtime import functions_settings

F = llgrad.nn.functional
pytestmark = pytest.mark.skipif(
    platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"),
    reason="flushing subnormals is set through x86-64 glibc's fenv")
TINY = 1e-39                        # (subnormal in float32)


@pytest.fixture
def flush():
    old = llgrad.get_num_threads()
    yield llgrad.set_flush_denormal
    llgrad.set_flush_denormal(False)
    llgrad.set_num_threads(old)


def test_eager_ops_flush_and_stop(flush):
    x = llgrad.tensor([TINY, 1.0, -TINY])
    assert (x * 1.0).tolist()[0] == pytest.approx(TINY)
    assert flush(True) is True
    assert (x * 1.0).tolist() == [0.0, 1.0, 0.0]
    assert (x + 0.0).tolist() == [0.0, 1.0, 0.0]
    assert flush(False) is True
    assert (x * 1.0).tolist()[0] == pytest.approx(TINY)


def test_matches_torch(flush):
    torch = pytest.importorskip("torch")
    try:
        for mode in (True, False):
            assert flush(mode) is torch.set_flush_denormal(mode) is True
            for make in (lambda L: L.tensor([TINY, 2.0]) * 1.0,
                         lambda L: L.tensor([1e-30]) * L.tensor([1e-10]),
                         lambda L: L.tensor([TINY, 3.0], dtype=L.float64).float() * 1.0):
                np.testing.assert_array_equal(make(llgrad).numpy(), make(torch).numpy())
    finally:
        torch.set_flush_denormal(False)


def _tiny(*shape):
    return np.full(shape, TINY, np.float32)


def test_pool_workers_take_the_callers_flags(flush):
    llgrad.set_num_threads(2)
    x = llgrad.tensor(_tiny(1 << 20))
    y = llgrad.tensor(np.ones(1 << 20, np.float32))

    @llgrad.compile
    def scaled(a, b):
        return a * b + 0.0

    a, b = llgrad.tensor(_tiny(512, 512)), llgrad.tensor(np.ones((512, 512), np.float32))

    def every_path():
        gelu = F.gelu(x)
        gelu = F.gelu(x)            # (the first call may start the kernel's build)
        eager_builds.wait()
        return [scaled(x, y).numpy(), F.gelu(x).numpy(), (a @ b).numpy()]

    for _ in range(2):
        off = every_path()          # (the workers run jobs without flushing first)
    assert all((r != 0).all() for r in off)
    assert flush(True) is True
    on = every_path()
    assert all((r == 0).all() for r in on), [int((r != 0).sum()) for r in on]
    assert flush(False) is True
    back = every_path()
    for r, want in zip(back, off):
        np.testing.assert_array_equal(r, want)


def test_reset_turns_it_off(flush):
    assert flush(True) is True
    functions_settings._reset()
    assert (llgrad.tensor([TINY]) * 1.0).tolist()[0] == pytest.approx(TINY)
