"""The native float32 Box-Muller (codegen/box_muller.py) against ir/torch_vecmath.py's NumPy
passes and against PyTorch: randn / normal_ fills of every size shape (a whole number of
16-value blocks, a ragged end), with and without mean and std, special uniforms at the
ends of [0, 1), give the same bits all three ways; in the background mode the NumPy passes
serve until the loop is ready, with the same values."""
import numpy as np
import pytest

import llgrad
from llgrad.compile import eager_builds, eager_twister
from llgrad.ir import torch_random as tr


def _uniforms(blocks):
    rng = np.random.default_rng(5)
    u = (rng.integers(0, 2 ** 24, 16 * blocks) * 2.0 ** -24).astype(np.float32)
    u[:4] = [0.0, 2.0 ** -24, 1 - 2.0 ** -24, 0.5]      # (log of 1 - u: 1, ~1, 2**-24, 1/2)
    u[8:12] = [0.0, 0.25, 1 - 2.0 ** -24, 0.125]        # (angles at 0, pi/2, ~2 pi, pi/4)
    return u


@pytest.mark.parametrize("mean, std", [(0.0, 1.0), (0.5, 2.0), (-3.0, 1e-3)])
def test_the_loop_gives_the_numpy_passes_bits(mean, std):
    u = _uniforms(2000)
    saved = tr.set_native_box_muller(None)
    try:
        want = tr._box_muller16(u, "float32", mean, std)
    finally:
        tr.set_native_box_muller(saved)
    loop = eager_twister._build_box_muller()[0]
    got = np.empty_like(u)
    loop(u.ctypes.data, got.ctypes.data, u.size // 16, mean, std, int(std != 1 or mean != 0))
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("n", [16, 1000, 4096, 100003])
def test_randn_and_normal_are_torchs(n):
    torch = pytest.importorskip("torch")
    eager_twister._loops["bm"] = eager_twister._build_box_muller()     # (built now)
    for mean, std in ((0.0, 1.0), (0.5, 2.0)):
        torch.manual_seed(7)
        want = torch.empty(n).normal_(mean, std).numpy()
        llgrad.manual_seed(7)
        np.testing.assert_array_equal(llgrad.empty(n).normal_(mean, std).numpy(), want)


def test_in_the_background_mode_numpy_serves_until_the_loop_is_ready(cold_kernels):
    eager_twister._loops.pop("bm", None)
    ran = []

    def hook(u, mean, std):
        out = eager_twister.box_muller(u, mean, std)
        ran.append(out is not None)
        return out
    saved = tr.set_native_box_muller(hook)
    try:
        llgrad.manual_seed(3)
        first = llgrad.randn(4096).numpy()          # (the build is queued: NumPy's passes)
        eager_builds.wait()
        llgrad.manual_seed(3)
        second = llgrad.randn(4096).numpy()
    finally:
        tr.set_native_box_muller(saved)
    assert ran == [False, True]
    np.testing.assert_array_equal(first, second)
