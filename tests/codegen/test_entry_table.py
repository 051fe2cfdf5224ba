"""An entry calling more than TABLE_CALLS groups walks a call table (codegen/entry_table.py):
its module no longer grows with the depth, and what it computes is the interpreter's and
eager's, with constants, index checks, a split backward and code shared between sizes."""
import numpy as np
import pytest

import llgrad
from llgrad.codegen.entry_table import TABLE_CALLS, uses_table
from llgrad.codegen.lower import lower
from llgrad.ir.interpret import evaluate


def _chain(depth):
    def f(x, w):
        h = x
        for k in range(depth):
            # (a constant per layer: the table reaches module globals too)
            h = (h @ w).tanh() * llgrad.tensor([0.5, 0.25] * 8) + x * (1.0 + k % 3)
        return h.sum(0)
    return f


def _lowered(depth, rows=8, **kw):
    x, w = llgrad.randn(rows, 16), llgrad.randn(16, 16) * 0.1
    g = llgrad.trace(_chain(depth), x, w)
    k = lower(g, **kw)
    arrays = [x.numpy(), w.numpy()]
    got = k(arrays)
    want, _ = evaluate(g, arrays)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    return k


def test_a_deep_graph_runs_from_a_table_and_its_module_does_not_grow():
    shallow, deep, deeper = _lowered(4), _lowered(40), _lowered(80)
    assert not uses_table(shallow.plan) and len(shallow.plan.groups) <= TABLE_CALLS
    assert uses_table(deep.plan) and deep.plan.call_table is not None
    # (the 80-layer module holds the 40-layer one's functions: no call per group)
    assert len(deeper.ir_before) < 1.1 * len(deep.ir_before)
    assert len(deeper.plan.groups) > 1.8 * len(deep.plan.groups)


def test_code_shared_between_sizes_runs_each_size_from_its_own_table():
    kernels = [_lowered(40, rows=n, share_sizes=True) for n in (8, 12, 20)]
    assert all(uses_table(k.plan) for k in kernels)
    assert kernels[-1].shares_sizes


def _deep_gather(depth):
    def f(x, w, idx):
        h = x
        for _ in range(depth):
            h = (h @ w).tanh() + x
        return h[idx].sum()
    return f


def test_an_index_check_in_a_table_entry_raises_as_eager():
    x, w = llgrad.randn(6, 8), llgrad.randn(8, 8) * 0.1
    f = _deep_gather(40)
    cf = llgrad.compile(f)
    ok = llgrad.tensor([0, 5, 2])
    for _ in range(3):
        np.testing.assert_allclose(cf(x, w, ok).item(), f(x, w, ok).item(), rtol=1e-5)
    cf.wait()
    assert uses_table(cf.entries[-1].kernels["forward"].plan)
    bad = llgrad.tensor([0, 6, 2])
    with pytest.raises(IndexError) as want:
        f(x, w, bad)
    with pytest.raises(IndexError) as got:
        cf(x, w, bad)
    assert str(got.value) == str(want.value)


def test_a_split_deep_backward_equals_eager():
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((64, 256)).astype(np.float32)] + [
        (rng.standard_normal((256, 256)) * 0.06).astype(np.float32) for _ in range(14)]

    def mlp(x, *ws):
        h = x
        for w in ws:
            h = (h @ w).relu() + h * 0.5
        return (h * h).mean()

    def grads(fn):
        x, *ws = [llgrad.tensor(a, requires_grad=k > 0) for k, a in enumerate(arrays)]
        return [g.numpy() for g in llgrad.autograd.grad(fn(x, *ws), ws)]
    cf = llgrad.compile(mlp)
    for _ in range(3):
        got = grads(cf)
        cf.wait()
    want = grads(mlp)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
    kernel = cf.entries[-1].kernels["backward"]
    assert uses_table(kernel.plan) and kernel.split is not None
