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


# ---- what functions reached through objects read ----------------------------------------------
w_method = llgrad.ones(3)
scale_method = 2.0


class _Lambda(nn.Module):          # (the "What is torch.nn really?" Lambda module)
    def __init__(self, func):
        super().__init__()
        self.func = func

    def forward(self, x):
        return self.func(x)


class _ReadsGlobals(nn.Module):
    def forward(self, x):
        return x * w_method * scale_method


def _call_sum(m, x):
    return m(x).sum()


@pytest.mark.parametrize("make", [lambda: _Lambda(lambda x: x * w_method), _ReadsGlobals],
                         ids=["lambda-module", "method"])
def test_globals_read_by_functions_reached_through_objects(make):
    """A global tensor that a Lambda module's function or a method of the user's class
    reads is an input (not a constant baked in), a global number a guard."""
    global scale_method
    cf = llgrad.compile(_call_sum, backend="llvm")
    m, x = make(), llgrad.tensor([1.0, 2.0, 3.0])
    with llgrad.no_grad():
        w_method.fill_(1.0)
    try:
        for k in range(5):              # (the third call on: the compiled guard walker)
            assert cf(m, x).item() == _call_sum(m, x).item(), k
            with llgrad.no_grad():
                w_method.add_(1.0)
            if k == 3:
                scale_method = 3.0
    finally:
        scale_method = 2.0


def test_a_hook_writing_python_state_is_not_replayed_silently():
    """A forward hook that keeps activations in a dict: no call leaves the dict stale (the
    tensor it puts there is an output that each compiled call puts back: attr_writes.py)."""
    llgrad.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 2), nn.Tanh())
    seen = {}
    model[0].register_forward_hook(lambda m, a, out: seen.__setitem__("fc", out.detach()))
    cf = llgrad.compile(_call_sum, backend="llvm")
    for k in range(4):
        x = llgrad.full((2, 3), float(k))
        cf(model, x)
        np.testing.assert_allclose(seen["fc"].numpy(), model[0](x).detach().numpy())
    assert cf.n_traces == 2 and cf.entries      # (the first call adds the key)


@pytest.mark.parametrize("kind", ["random.Random", "numpy Generator", "numpy RandomState"])
def test_draws_from_the_users_own_generator_run_eagerly(kind):
    import random
    make = {"random.Random": lambda: random.Random(0),
            "numpy Generator": lambda: np.random.default_rng(0),
            "numpy RandomState": lambda: np.random.RandomState(0)}[kind]
    draw = {"random.Random": lambda g: g.random(), "numpy Generator": lambda g: g.random(),
            "numpy RandomState": lambda g: g.rand()}[kind]
    g, ref = make(), make()

    def f(x):
        return x * draw(g)

    cf = llgrad.compile(f, backend="llvm")
    with pytest.warns(UserWarning, match="draws from a .*(Random|Generator|RandomState) "
                                         "object"):
        for _ in range(3):
            assert cf(llgrad.ones(1)).item() == pytest.approx(draw(ref), rel=1e-6)
