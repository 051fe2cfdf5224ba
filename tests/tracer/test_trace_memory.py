"""A traced run holds memory as eager does: the tracer keeps the tensors it has seen weakly
(tracer/bindings.py), so intermediates die when eager lets go of them, and a compiled
function keeps no copy of its inputs. Tensors that reach a dead root's memory (detach(),
.data) still read its traced value, not a constant."""
import tracemalloc
import weakref

import numpy as np
import pytest

import llgrad
from llgrad.ir import interpret


def test_intermediates_die_during_the_trace_as_in_eager():
    seen = {}

    def f(x):
        refs = []
        for _ in range(6):
            x = x * 0.5 + 1
            refs.append(weakref.ref(x))
        seen["alive"] = sum(r() is not None for r in refs[:-1])
        return x.sum()

    f(llgrad.randn(16))
    assert seen["alive"] == 0
    llgrad.trace(f, llgrad.randn(16))
    assert seen["alive"] == 0       # (the tracer held all five until the trace ended)


def test_saved_activations_die_at_the_backward_inside_a_trace():
    seen = {}

    def step(w, x):
        h = (x @ w).tanh()
        ref = weakref.ref(h)
        loss = (h * h).sum()
        del h
        loss.backward()             # lets go of what tanh and mul saved
        seen["alive"] = ref() is not None
        return loss.detach()

    w, x = llgrad.randn(8, 8, requires_grad=True), llgrad.randn(4, 8)
    step(w, x)
    assert seen["alive"] is False
    w.grad = None
    llgrad.trace(step, w, x)
    assert seen["alive"] is False


def _peak(fn, *args):
    tracemalloc.start()
    try:
        fn(*args)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_trace_peak_memory_stays_near_eager():
    def chain(x):
        for _ in range(40):
            x = (x * 0.5).tanh() + 0.25
        return x.sum()

    x = llgrad.randn(1 << 18)          # 1 MiB per intermediate
    eager = _peak(chain, x)
    traced = _peak(llgrad.trace, chain, x)
    assert traced < eager + (4 << 20), (eager, traced)     # (was 40 intermediates more)


def test_compiled_step_keeps_no_copy_of_its_inputs():
    w = llgrad.randn(64, 64, requires_grad=True)
    opt = llgrad.optim.SGD([w], lr=0.1)

    @llgrad.compile(backend="interpret")
    def step(x):
        opt.zero_grad()
        loss = (x @ w).tanh().sum()
        loss.backward()
        opt.step()
        return loss.detach()

    for _ in range(2):
        step(llgrad.randn(8, 64))
    assert step.entries
    for e in step.entries:
        for g in (e.forward, e.backward):
            assert getattr(g, "example_inputs", None) is None
    # llgrad.trace still gives them (the interpreter's feeds)
    assert len(llgrad.trace(lambda x: x * 2, llgrad.ones(3)).example_inputs) == 1


def _detached_root(x):
    y = x * 2
    d = y.detach()              # the same storage, y's root dies here
    del y
    d.add_(1)                   # written through the alias
    return d * 3


def _data_root(x):
    y = x * 2
    d = y.data                  # a storage of its own over y's memory
    del y
    return d + 1


def _dead_root_then_view(x):
    y = (x + 1).reshape(2, 3)
    v = y.detach().t()
    del y
    v.mul_(2)
    return v.sum(0)


@pytest.mark.parametrize("fn", [_detached_root, _data_root, _dead_root_then_view])
@pytest.mark.parametrize("backend", ["interpret", "llvm"])
def test_memory_reached_after_its_root_died_keeps_its_traced_value(fn, backend):
    g = llgrad.trace(fn, llgrad.ones(6))
    assert not [n for n in g.nodes if n.op == "constant"]
    got = interpret(g, np.arange(6, dtype=np.float32))[0]
    np.testing.assert_allclose(got, fn(llgrad.arange(6.0)).numpy())
    cf = llgrad.compile(fn, backend=backend)
    for k in range(3):
        x = llgrad.randn(6)
        np.testing.assert_allclose(cf(x).numpy(), fn(x).numpy(), rtol=1e-6)
    assert cf.n_traces == 1


def test_a_new_storage_at_a_dead_roots_address_keeps_that_memorys_value(monkeypatch):
    """`moving_mean = (...).data` (d2l's BatchNorm): the root's storage dies while .data's
    holds its memory, and a new storage may get the dead one's address. Binding it used to
    overwrite the dead root, so the memory's other tensor read as a constant of the trace:
    compiled calls replayed the first call's moving statistics (~1 run in 10). The address
    reuse is made certain here by giving the new storage the dead one's id."""
    from llgrad.tracer import bindings
    b = bindings.Bindings()
    y = llgrad.ones(3)
    b._bind_root(y, "y's value")
    d = y.data                                  # its own storage over y's memory
    fresh = llgrad.zeros(3)
    same = {id(fresh._storage): id(y._storage)}  # (y's storage "dead", its address reused)
    monkeypatch.setattr(bindings, "id", lambda o: same.get(id(o), id(o)), raising=False)
    b._bind_root(fresh, "fresh's value")
    assert b.roots[b._sid(d)][1] == "y's value"
    assert b.roots[b._sid(fresh)][1] == "fresh's value"
