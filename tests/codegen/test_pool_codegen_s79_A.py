"""The thread pool's module (codegen/lowerings/pool.py) is built with O3's code generation and
without the IR passes (jit.compile_private(opt="codegen")): its code is hand-written SSA whose
waits are spins on atomics, and the passes were ~60% of its LLVM time in a cold process's
first build. Kernels that thread through it still give torch's results."""
import ctypes
import sys

import numpy as np
import pytest

import llgrad
from llgrad.codegen.lower import lower
from llgrad.codegen.lowerings import pool
from llgrad.codegen.native import jit
from llgrad.ir import Builder, TensorType

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")


def test_pool_module_skips_the_ir_passes(monkeypatch):
    modes = []
    generate = jit._generate

    def recording(irmod, mode, keep_ir):
        modes.append(mode)
        return generate(irmod, mode, keep_ir)

    monkeypatch.setattr(jit, "_generate", recording)
    monkeypatch.setattr(jit, "load_private", lambda key, names: None)   # (built, not loaded)
    lib = pool._build()
    assert modes == ["O3-noopt"]
    pause = ctypes.CFUNCTYPE(None, ctypes.c_int64)(lib.address("llgrad_pool_pause"))
    pause(100)                          # (the code runs: 100 `pause` instructions)


@pytest.mark.slow
def test_threaded_kernel_through_the_pool_equals_torch():
    torch = pytest.importorskip("torch")
    n = 600_001
    bld = Builder("pooled_s79")
    x = bld.input(TensorType("float64", (n,)))
    e = bld.add("exp", [x], {})
    g = bld.ret(bld.add("sum", [e], {"dim": None, "keepdim": False}), bld.add("mul", [e, 2.0], {}))
    old = llgrad.get_num_threads()
    try:
        k = lower(g)
        if pool._state["lib"] is None:
            pytest.skip("no pool on this platform")
        assert jit.jit().symbols["llgrad_parallel_run"] == pool._state["lib"].address(
            "llgrad_pool_run")
        a = np.random.default_rng(0).standard_normal(n)
        want = torch.exp(torch.from_numpy(a))
        for t in (2, 1, 2):
            llgrad.set_num_threads(t)
            got = k([a])
            np.testing.assert_allclose(got[0], want.sum().item(), rtol=1e-12)
            np.testing.assert_allclose(got[1], (want * 2.0).numpy(), rtol=1e-14)
    finally:
        llgrad.set_num_threads(old)
