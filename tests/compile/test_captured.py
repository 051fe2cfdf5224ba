"""Tensors a compiled function reads from its closure or globals are inputs of its graph,
not constants baked in at the first call: written in place or trained between calls, they
are read afresh, and gradients reach them (guards.captured_tensors)."""
import numpy as np
import pytest

import llgrad
import llgrad.nn as nn
import llgrad.nn.functional as F

BACKENDS = ["llvm", "interpret"]

w_global = llgrad.ones(3)
late_global = None


def _reads_global(x):
    return (x * w_global).sum()


def _helper(x):
    return x * w_global


def _calls_helper(x):
    return _helper(x).sum()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [_reads_global, _calls_helper])
def test_global_written_in_place_is_read_afresh(backend, fn):
    cf = llgrad.compile(fn, backend=backend)
    x = llgrad.tensor([1.0, 2.0, 3.0])
    with llgrad.no_grad():
        w_global.fill_(1.0)
    for _ in range(4):
        assert cf(x).item() == fn(x).item()
        with llgrad.no_grad():
            w_global.mul_(2)
    assert cf.n_traces == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_closure_over_a_module_trains_it(backend):
    rng = np.random.default_rng(0)
    lin = nn.Linear(4, 3)
    x = llgrad.tensor(rng.standard_normal((5, 4)).astype(np.float32))

    def loss(x):
        return F.linear(x, lin.weight, lin.bias).tanh().sum()

    cf = llgrad.compile(loss, backend=backend)
    for _ in range(3):
        for p in lin.parameters():
            p.grad = None
        want = loss(x)
        want.backward()
        want_grads = [p.grad.numpy().copy() for p in lin.parameters()]
        for p in lin.parameters():
            p.grad = None
        got = cf(x)
        got.backward()
        assert abs(got.item() - want.item()) < 1e-5
        for p, g in zip(lin.parameters(), want_grads):
            np.testing.assert_allclose(p.grad.numpy(), g, rtol=1e-5, atol=1e-6)
        with llgrad.no_grad():                         # an optimiser step, in place
            for p in lin.parameters():
                p.sub_(0.1 * p.grad)


def test_value_and_grad_of_a_function_reading_a_global():
    vg = llgrad.value_and_grad(_reads_global, backend="llvm")
    x = llgrad.tensor([1.0, 2.0, 3.0])
    with llgrad.no_grad():
        w_global.fill_(1.0)
    for k in range(3):
        value, g = vg(x)
        assert value.item() == 6.0 * 3 ** k and g.tolist() == [3.0 ** k] * 3
        with llgrad.no_grad():
            w_global.mul_(3)


def test_global_made_after_decoration():
    global late_global

    @llgrad.compile(backend="llvm")
    def f(x):
        return x * late_global

    late_global = llgrad.tensor([2.0, 2.0])
    x = llgrad.ones(2)
    assert f(x).tolist() == [2.0, 2.0]
    with llgrad.no_grad():
        late_global.fill_(5.0)
    for _ in range(2):
        assert f(x).tolist() == [5.0, 5.0]


def test_a_plain_function_keeps_the_flat_key():
    # nothing captured: the call path keyed by the arguments alone stays in use
    f = llgrad.compile(lambda x: (x * 2).sum(), backend="llvm")
    x = llgrad.ones(3)
    for _ in range(3):
        f(x)
        f.wait()        # (a runner is remembered once the native code is in use)
    assert f._plain and len(f._fast) == 1
    g = llgrad.compile(_reads_global, backend="llvm")
    for _ in range(3):
        g(x)
        g.wait()
    # (it reads a tensor from its globals: a compiled guard walker keys its calls)
    assert not g._plain and len(g._walkers) == 1 and len(g._fast) == 1
