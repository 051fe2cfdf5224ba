"""Issue 20, stop 76 (helper G): the few-row products of a recurrent layer's shared weight
(codegen/lowerings/shared_weight_gemm.py) go to llgrad's own GEMM only on hosts with 512-bit
vectors, where it beat OpenBLAS; on an AVX2 host (AMD EPYC znver3) gemm.py ran them 1.4x
slower than OpenBLAS, so there they stay with BLAS. LLGRAD_SHARED_WEIGHT_GEMM=1 / 0 forces
the rule on / off, and is part of the kernels' keys (a kernel planned one way is never
found by the other)."""
import numpy as np
import pytest

import llgrad
from llgrad.codegen.build import blas_available
from llgrad.codegen.lower import lower
from llgrad.codegen.lowerings import shared_weight_gemm
from llgrad.codegen.native import jit
from llgrad.ir import Builder, TensorType
from llgrad.ir.interpret import evaluate

pytestmark = pytest.mark.skipif(not blas_available(),
                                reason="the rule chooses between BLAS and gemm.py")


def _recurrence(M=8, K=12, N=20, steps=3):
    """h_{t+1} = tanh(h_t @ W)[:, :K]: one W read by every step's product (W_hh^T)."""
    bld = Builder("recurrence_s76")
    h = x = bld.input(TensorType("float32", (M, K)))
    w = bld.input(TensorType("float32", (K, N)))
    outs = []
    for _ in range(steps):
        y = bld.add("mm", [h, w], {})
        outs.append(y)
        a = bld.add("tanh", [y])
        h = bld.add("slice", [a], dict(dim=1, start=0, end=K, step=1), view_of=a)
    return bld.ret(*outs), [x, w]


def _run(monkeypatch, setting):
    if setting is None:
        monkeypatch.delenv("LLGRAD_SHARED_WEIGHT_GEMM", raising=False)
    else:
        monkeypatch.setenv("LLGRAD_SHARED_WEIGHT_GEMM", setting)
    g, ins = _recurrence()
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(v.type.shape).astype(np.float32) for v in ins]
    k = lower(g)
    want, _ = evaluate(g, arrays)
    for a, b in zip(k(arrays), want):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-5)
    kinds = [grp.state["kind"] for grp in k.plan.groups if grp.root.op == "mm"]
    return kinds, k.cache_key


def test_the_rule_follows_the_host_and_the_setting(monkeypatch):
    before = llgrad.get_num_threads()
    llgrad.set_num_threads(1)
    try:
        auto, key_auto = _run(monkeypatch, None)
        on, key_on = _run(monkeypatch, "1")
        off, key_off = _run(monkeypatch, "0")
    finally:
        llgrad.set_num_threads(before)
    assert on == ["small"] * 3 and off == ["blas"] * 3, (on, off)
    wide = jit.jit().vector_bits >= shared_weight_gemm.MIN_VECTOR_BITS
    assert auto == (on if wide else off), (auto, jit.jit().vector_bits)
    # the setting is in the key: each kernel is its own, never the other's from a cache
    assert key_on != key_off
    assert key_auto == (key_on if wide else key_off)
